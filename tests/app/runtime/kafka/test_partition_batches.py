"""Runs of events go to the engine in batches (``Engine.send_batch``); an event that
fails in a batch is dead-lettered and every other event counts, exactly as when each
event is sent on its own."""

from __future__ import annotations

from pathlib import Path

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.topology import Group, Topology
from tests.app.runtime.kafka.fakes import UP, TruncLog

HERE = Path(__file__).parent


def group() -> Group:
    config = AppConfig.from_dict({
        "app": "batches",
        "schemas": {"W": {"account": "string", "amount": "double"}},
        "functions": {"checked": {"import": "raising_functions:checked",
                                  "params": ["double"], "returns": "double"}},
        "statements": [
            {"name": "ctx", "epl": "create context ByAccount partition by account from W"},
            {"name": "s", "epl": "context ByAccount select account, count(*) as n, "
                                 "sum(checked(amount)) as total from W#length(3)"}]},
        HERE)
    return Topology.plan(config).groups["main"]


def event(offset: int, account: str, amount: float) -> InRecord:
    return InRecord("event", UP, offset, "W", 0, None, {"account": account, "amount": amount},
                    b"", UP, offset)


def barrier(offset: int, t: int) -> InRecord:
    return InRecord("barrier", UP, offset, payload={"t": t, "id": f"w{t}"}, via=UP,
                    via_offset=offset)


def rows(part: EnginePartition) -> list[tuple[str, str, int, object]]:
    return [(r.stream, r.context_partition, r.seq, r.row) for r in part.outputs]


def test_a_failing_event_in_a_batch_is_dead_lettered_and_the_rest_count(
        tmp_path: Path) -> None:
    # a negative amount raises; a watermark in between (offset 4)
    amounts = [5.0, 7.0, -1.0, 3.0, None, 4.0, -2.0, 6.0]
    batch = [barrier(i, 1000) if a is None else event(i, "AB"[i % 2], a)
             for i, a in enumerate(amounts)]
    part = EnginePartition(group(), 0, tmp_path / "batch", [UP], "changelog", None)
    part.restore(TruncLog())
    part.run(batch)
    # the same records one at a time, the failing ones left out
    one = EnginePartition(group(), 0, tmp_path / "one", [UP], "changelog", None)
    one.restore(TruncLog())
    for r in batch:
        if r.kind == "barrier" or r.payload["amount"] >= 0:
            one.run([r])
    assert rows(part) == rows(one) and len(rows(part)) == 5
    why = "engine error: UserFunctionError: function checked raised ValueError: negative amount"
    assert [(d.record.offset, d.reason) for d in part.dead] == [(2, why), (6, why)]
    assert part.poison == {(UP, 2), (UP, 6)}
    assert part.engine is not None and one.engine is not None
    assert part.engine.now_ms == one.engine.now_ms == 1000
    assert part.store.batch_writes() == one.store.batch_writes()
    # the partition goes on batching after the replay
    part.run([event(8, "A", 1.0), event(9, "B", 2.0)])
    one.run([event(8, "A", 1.0), event(9, "B", 2.0)])
    assert rows(part) == rows(one)
    part.close()
    one.close()
