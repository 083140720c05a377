"""Avro topics and registry subjects on the real broker and the real registry: the same
rows as JSON, a record that does not decode in the DLQ with the reason, and ``kepl
check`` of statements against registry subjects."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from app.cli.check import check_paths
from app.runtime.kafka import formats
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp
from tests.app.runtime.kafka.test_dlq import dead_letters

WITHDRAWAL = {"type": "record", "name": "Withdrawal", "namespace": "bank", "fields": [
    {"name": "account", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None}]}
STATEMENTS = [
    {"name": "big", "epl": "select account, amount from Withdrawal(amount >= 200)"},
    {"name": "per_account", "epl": "select irstream account, sum(amount) as total, "
                                   "count(*) as n from Withdrawal#length(3) group by account"},
]
EVENTS = [{"account": "A", "amount": 250.0, "note": None},
          {"account": "B", "amount": 10.0, "note": "x"},
          {"account": "A", "amount": 5.5, "note": None},
          {"account": "B", "amount": 700.0, "note": None},
          {"account": "C", "amount": 1.0, "note": "y"}]


WITHDRAWAL_JSON = {"type": "object", "properties": {
    "account": {"type": "string"}, "amount": {"type": "number"},
    "note": {"type": ["string", "null"]}}}


def _doc(name: str, registry: str | None = None, avro: bool = False,
         fmt: str = "avro") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "app": name,
        "schemas": {"Withdrawal": {"account": "string", "amount": "double",
                                   "note": "string"}},
        "topics": {"Withdrawal": f"{name}.withdrawal"},
        "statements": STATEMENTS,
    }
    if avro:
        doc["registry"] = registry
        doc["schemas"] = {"Withdrawal": {"subject": f"{name}.withdrawal-value"}}
        doc["formats"] = {
            "Withdrawal": fmt,
            "big": {"format": fmt, "schema": {"account": "string", "amount": "double"}},
            "per_account": {"format": fmt, "schema": {"account": "string",
                                                         "total": "double", "n": "long"}}}
    return doc


def _register(registry: str, subject: str, schema: dict[str, Any], kind: str = "AVRO"
              ) -> int:
    return SchemaRegistryClient({"url": registry}).register_schema(
        subject, Schema(json.dumps(schema), kind))


@pytest.fixture(scope="module")
def apps(kafka_bootstrap: str, schema_registry: str
         ) -> Iterator[tuple[KafkaApp, KafkaApp, KafkaApp]]:
    name = f"avro-{uuid.uuid4().hex[:8]}"
    _register(schema_registry, f"{name}.withdrawal-value", WITHDRAWAL)
    sid = _register(schema_registry, f"{name}-sr.withdrawal-value", WITHDRAWAL_JSON, "JSON")
    plain = KafkaApp(AppConfig.from_dict(_doc(f"{name}-json")), kafka_bootstrap, start=True)
    avro = KafkaApp(AppConfig.from_dict(_doc(name, schema_registry, avro=True)),
                    kafka_bootstrap, start=True)
    framed = KafkaApp(AppConfig.from_dict(_doc(f"{name}-sr", schema_registry, avro=True,
                                               fmt="json-schema")), kafka_bootstrap, start=True)
    ser = AvroSerializer(SchemaRegistryClient({"url": schema_registry}), json.dumps(WITHDRAWAL))
    ctx = SerializationContext(avro.config.topic_of("Withdrawal"), MessageField.VALUE)
    for i, e in enumerate(EVENTS):
        plain.send("Withdrawal", {k: v for k, v in e.items() if v is not None})
        avro.send("Withdrawal", ser(e, ctx))
        framed.send("Withdrawal", b"\x00" + sid.to_bytes(4, "big") + json.dumps(
            {k: v for k, v in e.items() if v is not None}).encode())
        if i == 2:
            # not Avro at all; then a good schema id with a truncated body
            avro.send("Withdrawal", b'{"account": "J", "amount": 1}')
            avro.send("Withdrawal", ser(e, ctx)[:7])
    plain.settle()
    avro.settle()
    framed.settle()
    yield plain, avro, framed
    plain.close()
    avro.close()
    framed.close()


Apps = tuple[KafkaApp, KafkaApp, KafkaApp]


def test_avro_input_and_output_give_the_rows_of_json(apps: Apps) -> None:
    plain, avro, framed = apps
    for stmt in ("big", "per_account"):
        want = [(r.stream, r.id, r.row) for r in
                read_rows(plain.bootstrap, plain.config.output_topic(stmt))]
        got = [(r.stream, r.id, r.row) for r in
               read_rows(avro.bootstrap, avro.config.output_topic(stmt))]
        assert got == want
        got = [(r.stream, r.id, r.row) for r in
               read_rows(framed.bootstrap, framed.config.output_topic(stmt))]
        assert got == want  # JSON Schema: the JSON behind the framing
    assert [r.row for r in read_rows(avro.bootstrap, avro.config.output_topic("big"))] == [
        {"account": "A", "amount": 250.0}, {"account": "B", "amount": 700.0}]


def test_output_records_are_avro_of_the_registered_schema(
        apps: Apps, schema_registry: str) -> None:
    _, avro, _ = apps
    topic = avro.config.output_topic("per_account")
    latest = SchemaRegistryClient({"url": schema_registry}).get_latest_version(
        f"{topic}-value")
    assert [f["name"] for f in json.loads(latest.schema.schema_str)["fields"]] == [
        "account", "total", "n"]
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": avro.bootstrap, "group.id": "kepl-test-avro-out"})
    c.assign([TopicPartition(topic, 0, 0)])
    m = c.poll(10)
    c.close()
    assert m is not None and m.value()[:1] == b"\x00"
    assert int.from_bytes(m.value()[1:5], "big") == latest.schema_id


def test_a_record_that_is_not_avro_goes_to_the_dlq_with_the_reason(apps: Apps) -> None:
    _, avro, framed = apps
    src = avro.config.topic_of("Withdrawal")
    got = [(m.value()[:1], dict(m.headers())["kepl.error"].decode(),
            dict(m.headers())["kepl.source"].decode())
           for m in dead_letters(avro.bootstrap, avro.config.dlq_topic)]
    assert [(v, s) for v, _, s in got] == [(b"{", f"{src}/0/3"), (b"\x00", f"{src}/0/4")]
    assert got[0][1] == ("not Avro in the Confluent wire format (no magic byte 0 and "
                         "schema id)")
    assert got[1][1].startswith("not Avro of schema id ")
    assert dead_letters(framed.bootstrap, framed.config.dlq_topic) == []


def test_kepl_check_types_statements_against_registry_subjects(
        schema_registry: str, tmp_path: Path) -> None:
    subject = f"check-{uuid.uuid4().hex[:8]}-value"
    _register(schema_registry, subject, WITHDRAWAL)
    nested = {"type": "record", "name": "Nested", "fields": [
        {"name": "where", "type": {"type": "record", "name": "Where",
                                   "fields": [{"name": "city", "type": "string"}]}}]}
    _register(schema_registry, f"{subject}-nested", nested)
    f = tmp_path / "app.yaml"
    f.write_text(f"""app: check
registry: {schema_registry}
schemas:
  Withdrawal: {{subject: {subject}}}
statements:
  - name: ok
    epl: select account, sum(amount) as total from Withdrawal group by account
  - name: typo
    epl: select acount from Withdrawal
""")
    out, errors = check_paths([str(f)])
    assert errors == 1
    assert "line 9:17: unknown property 'acount' of Withdrawal" in out[0]
    f.write_text(f.read_text().replace(subject, f"{subject}-nested"))
    out, errors = check_paths([str(f)])
    assert errors == 1
    assert ("line 4:15: subject '" + subject + "-nested': field 'where' has Avro type "
            '{"type": "record", "name": "Where", "fields": [{"name": "city", "type": '
            '"string"}]}, which no kepl property type holds') in out[0]
    f.write_text(f.read_text().replace(f"{subject}-nested", "no-such-subject"))
    out, errors = check_paths([str(f)])
    # the rest of the line is the registry's own words (Apicurio: "No version 'latest'
    # found for artifact ..."; Confluent: "Subject 'no-such-subject' not found.")
    assert errors == 1 and "line 4:15: subject 'no-such-subject': " in out[0]


def test_a_bad_format_is_one_line(schema_registry: str) -> None:
    doc = _doc("fmt", schema_registry)
    doc["formats"] = {"Withdrawal": "xml"}
    with pytest.raises(ConfigError, match=r"^formats.Withdrawal: format must be one of "
                                          r"json, avro, json-schema, protobuf, got 'xml'$"):
        AppConfig.from_dict(doc)
    doc["formats"] = {"big": {"format": "avro", "schema": {}}}
    with pytest.raises(ConfigError, match=r"^formats.big.schema: give the output's "):
        AppConfig.from_dict(doc)
    doc["formats"] = {"nothing": "avro"}
    with pytest.raises(ConfigError, match="no event type or statement of that name"):
        AppConfig.from_dict(doc)


def test_avro_properties_map_to_kepl_types() -> None:
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": ["null", "float"]},
        {"name": "c", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "d", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "e", "type": "boolean"}, {"name": "f", "type": "int"}]}
    assert formats.avro_properties(schema, "t") == {
        "a": "long", "b": "float", "c": "long", "d": "string", "e": "boolean", "f": "int"}


def test_row_writer_writes_what_fastavro_reads() -> None:
    import io
    import math
    import random

    from fastavro import parse_schema, schemaless_reader

    schema = formats.output_schema({"formats": {"o": {"format": "avro", "schema": {
        "a": "string", "b": "double", "c": "long", "d": "boolean", "e": "int",
        "g": "float"}}}}, "o")
    write, parsed = formats.row_writer(schema), parse_schema(schema)
    rnd = random.Random(3)
    for _ in range(2000):
        row = {"a": rnd.choice([None, "x" * rnd.randrange(200), "é漢"]),
               "b": rnd.choice([None, rnd.random() * 1e9, math.nan, -math.inf, 3]),
               "c": rnd.choice([None, rnd.randrange(-(1 << 63), 1 << 63), 0, -1]),
               "d": rnd.choice([None, True, False]),
               "e": rnd.choice([None, rnd.randrange(-(1 << 31), 1 << 31)]),
               "g": rnd.choice([None, 1.5, -2])}
        back = schemaless_reader(io.BytesIO(write(row)), parsed, None)
        assert all(back[k] == v or (v != v and back[k] != back[k]) for k, v in row.items())
    with pytest.raises(ValueError, match=r"^t: column 'c' holds 'x', which its Avro field "):
        formats.row_writer(schema, "t")({"c": "x"})


def test_deploy_registers_each_avro_output_schema(schema_registry: str) -> None:
    name = f"reg-{uuid.uuid4().hex[:8]}"
    doc = {**_doc(name), "registry": schema_registry}
    doc["formats"] = {"per_account": {"format": "avro", "schema": {
        "account": "string", "total": "double", "n": "long"}}}
    config = AppConfig.from_dict(doc)
    lines = formats.register_outputs(config)
    subject = f"kepl.{name}.out.per_account-value"
    latest = SchemaRegistryClient({"url": schema_registry}).get_latest_version(subject)
    assert lines == [f"{subject}: schema id {latest.schema_id} (statement per_account, Avro)"]
    assert json.loads(latest.schema.schema_str) == {
        "type": "record", "name": "per_account", "namespace": "kepl", "fields": [
            {"name": "account", "type": ["null", "string"], "default": None},
            {"name": "total", "type": ["null", "double"], "default": None},
            {"name": "n", "type": ["null", "long"], "default": None}]}
    assert formats.register_outputs(config) == lines  # the same schema: the same id


def test_a_json_schema_subject_gives_the_properties(schema_registry: str) -> None:
    subject = f"js-{uuid.uuid4().hex[:8]}-value"
    _register(schema_registry, subject, WITHDRAWAL_JSON, "JSON")
    assert formats.subject_properties(schema_registry, subject, "W") == {
        "account": "string", "amount": "double", "note": "string"}
