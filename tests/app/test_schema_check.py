"""app.schema_check decides as jsonschema does on statement files, valid and broken."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from app.schema_check import conforms
from app.statements import SCHEMA_PATH, schema_errors

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads(SCHEMA_PATH.read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

VALID = {
    "app": "shop.v1",
    "schemas": {"Order": {"id": "string", "qty": "int", "price": "double"},
                "Sub": {"subject": "sub-value"}, "One": {"subject": "string"}},
    "topics": {"Order": "orders"},
    "partitions": 3,
    "context_partitions": {"ByKey": 4, "Other": "source"},
    "processing_guarantee": "at_least_once",
    "on_lost_input": "stop",
    "kafka": {"client.id": "x", "linger.ms": 5, "enable.idempotence": True},
    "replication_factor": 1,
    "min_insync_replicas": 1,
    "max_string_length": {"*": 100, "Order": 0},
    "functions": {"f": {"import": "m:f", "params": ["int", "event"], "returns": "any",
                        "kind": "single-row", "path": "."}},
    "statements": [{"name": "s1", "epl": "select * from Order", "output_topic": "t"}],
    "registry": "http://127.0.0.1:8081/apis/ccompat/v7",
    "formats": {"Order": "avro", "s1": {"format": "json-schema", "schema": "Order"}},
}

# values that are wrong (or right) somewhere in the schema: types JSON and YAML give
ODD_VALUES: list[Any] = [None, True, False, 0, 1, -1, 1.0, 1.5, 10001, "", "source",
                         "x y", "ok", "string", [], ["int"], {}, {"a": 1}, float("nan")]


def _decided(doc: Any) -> bool:
    return not any(True for _ in VALIDATOR.iter_errors(doc))


def _mutations(doc: Any, rnd: random.Random, n: int) -> list[Any]:
    """``n`` copies of doc with one value replaced, one key added or one key removed."""
    out = []
    for _ in range(n):
        d = copy.deepcopy(doc)
        path: list[Any] = []
        node = d
        while isinstance(node, dict | list) and node and rnd.random() < 0.7:
            key = rnd.choice(list(node)) if isinstance(node, dict) else rnd.randrange(len(node))
            path.append((node, key))
            node = node[key]
        if not path:
            d[rnd.choice(["extra", "app", "statements"])] = rnd.choice(ODD_VALUES)
        else:
            parent, key = path[-1]
            action = rnd.random()
            if action < 0.6:
                parent[key] = copy.deepcopy(rnd.choice(ODD_VALUES))
            elif action < 0.8 and isinstance(parent, dict):
                del parent[key]
            elif isinstance(parent, dict):
                parent[rnd.choice(["zz", "1bad", "ok_name", 7])] = rnd.choice(ODD_VALUES)
        out.append(d)
    return out


def test_a_valid_file_conforms() -> None:
    assert conforms(VALID, SCHEMA) is True
    assert _decided(VALID)


@pytest.mark.parametrize("seed", range(4))
def test_agrees_with_jsonschema_on_broken_files(seed: int) -> None:
    rnd = random.Random(seed)
    docs = _mutations(VALID, rnd, 400)
    disagree = [d for d in docs if conforms(d, SCHEMA) is not _decided(d)]
    assert disagree == []
    # the mutations reach both answers
    assert {conforms(d, SCHEMA) for d in docs} == {True, False}


def test_agrees_on_the_repository_statement_files() -> None:
    files = sorted(ROOT.glob("examples/*.yaml")) + sorted(ROOT.glob("tests/app/cli/golden/*.yaml"))
    docs = [yaml.safe_load(f.read_text()) for f in files]
    docs = [d for d in docs if isinstance(d, dict) and "statements" in d and "app" in d]
    assert docs
    for d in docs:
        assert conforms(d, SCHEMA) is _decided(d)


def test_an_unknown_keyword_leaves_the_answer_to_jsonschema() -> None:
    assert conforms({"a": 1}, {"type": "object", "patternProperties": {"^a": {}}}) is None
    assert conforms(1, {"$ref": "#/x"}) is None


def test_schema_errors_still_words_every_error() -> None:
    bad = dict(VALID, partitions=0, extra=1)
    messages = [e.message for e in schema_errors(bad)]
    assert messages == ["Additional properties are not allowed ('extra' was unexpected)",
                        "0 is less than the minimum of 1"]
    assert schema_errors(VALID) == []
