"""``kepl registry``: status of a registry that does not run, and bad arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main


def test_status_of_a_stopped_registry_is_exit_3(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry", "status", "--port", "1", "--data-dir", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert out == (f"stopped  url=http://127.0.0.1:1/apis/ccompat/v7  "
                   f"log={tmp_path / 'registry.log'}\n")


def test_stop_of_a_stopped_registry_says_so(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry", "stop", "--port", "1", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("stopped  url=")
