"""Short commands start fast: parser tables come from the cache, heavy packages stay unloaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.epl import lark_cache
from app.epl.lark_cache import cached_lark

ROOT = Path(__file__).resolve().parents[3]
BANK = ROOT / "examples" / "bank.yaml"
GRAMMAR = 'start: WORD+\n%import common.WORD\n%ignore " "\n'


def test_tables_are_written_once_then_loaded(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPL_CACHE_DIR", str(tmp_path / "cache"))
    first = cached_lark("demo", GRAMMAR, parser="lalr")
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(files) == 1 and files[0].startswith("demo-") and files[0].endswith(".lark")
    second = cached_lark("demo", GRAMMAR, parser="lalr")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == files
    assert second.parse("a b").children == first.parse("a b").children == ["a", "b"]


def test_a_changed_grammar_gets_its_own_tables(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPL_CACHE_DIR", str(tmp_path))
    cached_lark("demo", GRAMMAR, parser="lalr")
    changed = cached_lark("demo", GRAMMAR.replace("WORD+", "WORD WORD*"), parser="lalr")
    assert len(list(tmp_path.iterdir())) == 2
    assert changed.parse("a b").children == ["a", "b"]


def test_without_a_writable_cache_the_parser_is_built_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KEPL_CACHE_DIR", str(blocker / "kepl"))
    assert cached_lark("demo", GRAMMAR, parser="lalr").parse("a").children == ["a"]


def test_the_default_cache_directory_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEPL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert lark_cache.cache_dir() == Path("/somewhere/kepl")


def test_check_and_explain_load_no_kafka_spark_or_rocksdb_package() -> None:
    code = ("import sys\nfrom app.cli.main import main\n"
            "main(['check', sys.argv[1]])\nmain(['explain', sys.argv[1]])\n"
            "heavy = ('faust', 'confluent_kafka', 'aiokafka', 'pyspark', 'rocksdict')\n"
            "print(sorted(m for m in heavy if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code, str(BANK)], cwd=ROOT, check=True,
                         capture_output=True, text=True, env=dict(os.environ)).stdout
    assert out.splitlines()[-1] == "[]"


def test_check_pauses_the_collector_only_while_it_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    import gc

    from app.cli.main import main

    assert gc.isenabled()
    assert main(["check", str(BANK)]) == 0
    assert gc.isenabled()
    assert capsys.readouterr().out == "1 file(s) valid\n"
