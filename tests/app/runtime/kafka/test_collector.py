"""The worker's cyclic garbage collector: no collection within a checkpoint, one young
collection at each."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from app.runtime.kafka import collector as collector_mod
from app.runtime.kafka.collector import Collector


class Node:
    other: Node | None = None


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_young_cycles_wait_for_the_checkpoint_then_go() -> None:
    c = Collector(full_s=1e9, trim_s=0)
    assert gc.get_threshold()[0] == collector_mod.YOUNG_THRESHOLD
    gc.collect(0)
    ref = _cycle()
    # a checkpoint's worth of objects that stay alive: no collection runs meanwhile
    held = [[i] for i in range(20_000)]
    assert ref() is not None
    c.checkpointed(c.last_full + 1)
    assert ref() is None
    assert gc.get_freeze_count() >= len(held)


def test_the_older_thresholds_stay() -> None:
    gc.set_threshold(700, 7, 5)
    Collector(full_s=1e9, trim_s=0)
    assert gc.get_threshold() == (collector_mod.YOUNG_THRESHOLD, 7, 5)
