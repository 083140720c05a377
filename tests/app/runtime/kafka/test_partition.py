"""An ``EnginePartition`` is complete after ``__init__``: restoring, loading, running
records and committing them set no attribute that construction did not set first."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

from app.runtime.kafka.checkpoint import CheckpointRound
from app.runtime.kafka.partition import EnginePartition
from tests.app.runtime.kafka.fakes import UP, FakeInputs, FakeOutput, Names, TruncAdmin, TruncLog
from tests.app.runtime.kafka.test_snapshots import GROUP, records


def test_the_attributes_after_a_restore_and_a_checkpoint_are_those_after_init(
        tmp_path: Path) -> None:
    log = TruncLog()
    part = EnginePartition(GROUP, 0, tmp_path / "db", [UP], "changelog", None)
    made = set(vars(part))
    part.restore(log)
    assert set(vars(part)) == made
    batch = records(30)
    part.run(batch)
    assert part.outputs and set(vars(part)) == made
    inputs = FakeInputs()
    inputs.position = batch[-1].offset + 1
    CheckpointRound(FakeOutput(log), Names(), TruncAdmin(log), lambda p: None).run(
        {("main", 0): part}, [], inputs, None)
    assert log.high == 1 and part.outputs == [] and set(vars(part)) == made
    part.close()


def test_no_method_but_init_assigns_an_attribute_first() -> None:
    """Every ``self.x = ...`` outside ``__init__`` names an attribute ``__init__`` sets."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(EnginePartition)))
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)

    def assigned(fn: ast.FunctionDef) -> set[str]:
        out = set()
        for node in ast.walk(fn):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign)
                       else [])
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if (isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name)
                            and el.value.id == "self"):
                        out.add(el.attr)
        return out

    methods = [f for f in cls.body if isinstance(f, ast.FunctionDef)]
    in_init = next(assigned(f) for f in methods if f.name == "__init__")
    later = {f.name: assigned(f) - in_init for f in methods if f.name != "__init__"}
    assert {name: attrs for name, attrs in later.items() if attrs} == {}


_DIGEST = """
import hashlib, sys, tempfile
from pathlib import Path
from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.partition import EnginePartition, InRecord
from app.runtime.kafka.topology import Topology
from tests.app.runtime.kafka.fakes import UP, TruncLog
config = AppConfig.from_dict({"app": "a", "schemas": {"T": {"k": "string", "v": "double"}},
    "statements": [{"name": "c", "epl": "create context ByK partition by k from T"},
                   {"name": "s", "epl": "context ByK select k, sum(v) from T#length(3)"}]})
log = TruncLog()
with tempfile.TemporaryDirectory() as d:
    part = EnginePartition(Topology.plan(config).groups["main"], 0, Path(d) / "db", [UP],
                           "changelog", None)
    part.restore(log)
    batch = [InRecord("event", UP, i, "T", 0, i, {"k": f"K{i * 7 % 23}", "v": 1.0})
             for i in range(200)]
    for i in range(0, len(batch), 10):
        part.run(batch[i:i + 10])
        rec = part.seal()
        if rec is not None:
            value = rec.encode()
            part.committed(log.append(value), len(value))
    part.close()
h = hashlib.sha256()
for _offset, value in log.read("changelog", 0, 0):
    h.update(value)
print(h.hexdigest())
"""


def test_changelog_bytes_do_not_depend_on_the_hash_seed() -> None:
    """Same records, same changelog bytes, in processes with different string hashes
    (the row counters a batch touched are written in the order they were touched)."""
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[4])
    digests = {subprocess.run(
        [sys.executable, "-c", _DIGEST], check=True, capture_output=True, text=True,
        env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root}).stdout.strip()
        for seed in ("1", "2", "3")}
    assert len(digests) == 1 and len(next(iter(digests))) == 64
