"""Where the Spark JVM's own output goes: a log file unless verbose, its tail in the error
when the JVM does not start (fds 1 and 2 as a child process inherits them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.analytics.session import JvmStartError, _jvm_output


def test_the_jvm_output_goes_to_the_log(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    log = tmp_path / "jvm.log"
    with _jvm_output(log):
        os.write(1, b":: resolving dependencies :: org.apache.spark#spark-submit-parent\n")
        os.write(2, b"WARNING: Using incubator modules: jdk.incubator.vector\n")
    os.write(1, b"the command's output\n")
    assert capfd.readouterr() == ("the command's output\n", "")
    assert log.read_text() == (":: resolving dependencies :: org.apache.spark#spark-submit-"
                               "parent\nWARNING: Using incubator modules: jdk.incubator.vector\n")


def test_verbose_keeps_stdout_clean_and_shows_the_rest(tmp_path: Path,
                                                      capfd: pytest.CaptureFixture) -> None:
    with _jvm_output(None):
        os.write(1, b"Ivy Default Cache set to: /x\n")
    assert capfd.readouterr() == ("", "Ivy Default Cache set to: /x\n")


def test_a_jvm_that_does_not_start_shows_the_logs_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "jvm.log"
    with pytest.raises(JvmStartError) as e, _jvm_output(log):
        os.write(2, b"".join(b"line %d\n" % i for i in range(30)))
        raise RuntimeError("Java gateway process exited before sending its port number")
    lines = str(e.value).splitlines()
    assert lines[:2] == ["Spark did not start: Java gateway process exited before sending "
                         "its port number", f"last lines of {log}:"]
    assert lines[2:] == [f"line {i}" for i in range(10, 30)]
