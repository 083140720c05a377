"""The worker's C heap hygiene: capped malloc arenas and periodic trims."""

from __future__ import annotations

import gc

import pytest

from app.runtime.kafka import collector as collector_mod
from app.runtime.kafka import memory
from app.runtime.kafka.collector import Collector


def test_glibc_calls_answer() -> None:
    if memory._LIBC is None:
        pytest.fail("this machine's C library is glibc: mallopt and malloc_trim must load")
    assert memory.limit_arenas() is True
    assert isinstance(memory.trim(), bool)


def test_trims_at_most_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(collector_mod.memory, "trim", lambda: calls.append(1) or True)
    c = Collector(full_s=1e9, trim_s=30.0)
    start = c.last_trim
    c.checkpointed(start + 10)
    assert calls == []
    c.checkpointed(start + 31)
    assert calls == [1]
    c.checkpointed(c.last_trim + 5)
    assert calls == [1]
    gc.unfreeze()


def test_trim_interval_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(collector_mod.TRIM_ENV, "0")
    calls: list[int] = []
    monkeypatch.setattr(collector_mod.memory, "trim", lambda: calls.append(1) or True)
    c = Collector(full_s=1e9)
    assert c.trim_s == 0
    c.checkpointed(c.last_trim + 1e6)
    assert calls == []
    gc.unfreeze()
