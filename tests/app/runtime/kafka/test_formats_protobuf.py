"""Protobuf topics, output schemas from the select clause, and ``kepl send`` in the
registry formats, on the real broker and the real registry: the same rows as JSON, a
record that does not decode in the DLQ with the reason."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from app.cli.check import check_paths
from app.cli.main import main
from app.runtime.kafka import formats
from app.runtime.kafka.config import AppConfig, ConfigError
from app.runtime.kafka.reader import read_rows
from app.runtime.kafka.runner import KafkaApp
from tests.app.runtime.kafka.test_dlq import dead_letters
from tests.app.runtime.kafka.test_formats import EVENTS, STATEMENTS, _doc

WITHDRAWAL_PROTO = """syntax = "proto3";
package bank;
// a withdrawal; Where is there to give the file a nested message
message Withdrawal {
  string account = 1;
  double amount = 2;
  optional string note = 3;
  message Where { string city = 1; }
}
"""


def _pb_value(sid: int, event: dict[str, Any], long_indexes: bool = False) -> bytes:
    """A Confluent-framed Withdrawal written byte by byte (protobuf encoding guide):
    field 1 string, field 2 double (fixed64), field 3 string when not null."""
    import struct

    def s(n: int, v: str) -> bytes:
        b = v.encode()
        return bytes([n << 3 | 2, len(b)]) + b

    body = s(1, event["account"]) + bytes([2 << 3 | 1]) + struct.pack("<d", event["amount"])
    if event["note"] is not None:
        body += s(3, event["note"])
    return b"\x00" + sid.to_bytes(4, "big") + (b"\x02\x00" if long_indexes else b"\x00") + body


@pytest.fixture(scope="module")
def apps(kafka_bootstrap: str, schema_registry: str) -> Iterator[tuple[KafkaApp, KafkaApp]]:
    name = f"pb-{uuid.uuid4().hex[:8]}"
    sid = SchemaRegistryClient({"url": schema_registry}).register_schema(
        f"{name}.withdrawal-value", Schema(WITHDRAWAL_PROTO, "PROTOBUF"))
    plain = KafkaApp(AppConfig.from_dict(_doc(f"{name}-json")), kafka_bootstrap, start=True)
    doc = _doc(name, schema_registry, avro=True, fmt="protobuf")
    doc["formats"] = {"Withdrawal": "protobuf", "big": "protobuf", "per_account": "protobuf"}
    pb = KafkaApp(AppConfig.from_dict(doc), kafka_bootstrap, start=True)
    for i, e in enumerate(EVENTS):
        plain.send("Withdrawal", {k: v for k, v in e.items() if v is not None})
        pb.send("Withdrawal", _pb_value(sid, e, long_indexes=i % 2 == 1))
        if i == 2:
            # not Protobuf at all; then a good schema id with a truncated body
            pb.send("Withdrawal", b'{"account": "J", "amount": 1}')
            pb.send("Withdrawal", _pb_value(sid, e)[:8])
    plain.settle()
    pb.settle()
    yield plain, pb
    plain.close()
    pb.close()


def test_protobuf_input_and_output_give_the_rows_of_json(
        apps: tuple[KafkaApp, KafkaApp]) -> None:
    plain, pb = apps
    for stmt in ("big", "per_account"):
        want = [(r.stream, r.id, r.row) for r in
                read_rows(plain.bootstrap, plain.config.output_topic(stmt))]
        got = [(r.stream, r.id, r.row) for r in
               read_rows(pb.bootstrap, pb.config.output_topic(stmt))]
        assert got == want
    assert [r.row for r in read_rows(pb.bootstrap, pb.config.output_topic("big"))] == [
        {"account": "A", "amount": 250.0}, {"account": "B", "amount": 700.0}]


def test_output_records_are_protobuf_of_the_schema_from_the_select_clause(
        apps: tuple[KafkaApp, KafkaApp], schema_registry: str) -> None:
    _, pb = apps
    topic = pb.config.output_topic("per_account")
    latest = SchemaRegistryClient({"url": schema_registry}).get_latest_version(
        f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert latest.schema.schema_str.split("\n") == [
        'syntax = "proto3";', "package kepl;", "", "message per_account {",
        "  optional string account = 1;", "  optional double total = 2;",
        "  optional int64 n = 3;", "}", ""]
    c = Consumer({"bootstrap.servers": pb.bootstrap, "group.id": "kepl-test-pb-out"})
    c.assign([TopicPartition(topic, 0, 0)])
    m = c.poll(10)
    c.close()
    assert m is not None
    # magic byte, the id, message index [0]; then account "A" (field 1, length 1)
    assert m.value()[:8] == b"\x00" + latest.schema_id.to_bytes(4, "big") + b"\x00\x0a\x01"


def test_a_record_that_is_not_protobuf_goes_to_the_dlq_with_the_reason(
        apps: tuple[KafkaApp, KafkaApp]) -> None:
    _, pb = apps
    src = pb.config.topic_of("Withdrawal")
    got = [(m.value()[:1], dict(m.headers())["kepl.error"].decode(),
            dict(m.headers())["kepl.source"].decode())
           for m in dead_letters(pb.bootstrap, pb.config.dlq_topic)]
    assert [(v, s) for v, _, s in got] == [(b"{", f"{src}/0/3"), (b"\x00", f"{src}/0/4")]
    assert got[0][1] == ("not Protobuf in the Confluent wire format (no magic byte 0, "
                         "schema id and message indexes)")
    assert got[1][1].startswith("not Protobuf of schema id ")
    assert got[1][1].endswith("ProtoError: a length-delimited field runs past the record")


def test_kepl_check_types_statements_against_a_protobuf_subject(
        schema_registry: str, tmp_path: Path) -> None:
    subject = f"pbcheck-{uuid.uuid4().hex[:8]}-value"
    SchemaRegistryClient({"url": schema_registry}).register_schema(
        subject, Schema(WITHDRAWAL_PROTO, "PROTOBUF"))
    assert formats.subject_properties(schema_registry, subject, "W") == {
        "account": "string", "amount": "double", "note": "string"}
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


def test_deploy_registers_output_schemas_of_the_select_columns(schema_registry: str) -> None:
    name = f"derive-{uuid.uuid4().hex[:8]}"
    doc = {**_doc(name), "registry": schema_registry}
    doc["statements"] = [*STATEMENTS, {"name": "pb", "epl": "select account, amount > 5 as "
                                                            "big, count(*) as n from "
                                                            "Withdrawal"}]
    doc["formats"] = {"big": "avro", "per_account": "json-schema", "pb": "protobuf"}
    lines = formats.register_outputs(AppConfig.from_dict(doc))
    reg = SchemaRegistryClient({"url": schema_registry})
    big = reg.get_latest_version(f"kepl.{name}.out.big-value")
    per = reg.get_latest_version(f"kepl.{name}.out.per_account-value")
    pb = reg.get_latest_version(f"kepl.{name}.out.pb-value")
    assert lines == [
        f"kepl.{name}.out.big-value: schema id {big.schema_id} (statement big, Avro)",
        f"kepl.{name}.out.per_account-value: schema id {per.schema_id} (statement "
        "per_account, JSON Schema)",
        f"kepl.{name}.out.pb-value: schema id {pb.schema_id} (statement pb, Protobuf)"]
    assert pb.schema.schema_type == "PROTOBUF"
    assert "\n".join(pb.schema.schema_str.split("\n")[3:]) == (
        "message pb {\n  optional string account = 1;\n  optional bool big = 2;\n"
        "  optional int64 n = 3;\n}\n")
    assert [(f["name"], f["type"]) for f in json.loads(big.schema.schema_str)["fields"]] == [
        ("account", ["null", "string"]), ("amount", ["null", "double"])]
    assert json.loads(per.schema.schema_str)["properties"] == {
        "account": {"type": ["string", "null"]}, "total": {"type": ["number", "null"]},
        "n": {"type": ["integer", "null"]}}


def test_an_output_whose_columns_have_no_evident_type_needs_a_schema(
        schema_registry: str) -> None:
    doc = {**_doc("fmt"), "registry": schema_registry}
    doc["statements"] = [*STATEMENTS, {"name": "odd", "epl": "select prev(1, amount) as p "
                                                             "from Withdrawal#length(2)"}]
    doc["formats"] = {"odd": "protobuf"}
    with pytest.raises(ConfigError, match=r"^formats.odd: no schema given and none follows "
                                          r"from the select clause \(the type of column 'p' "
                                          r"is not evident\); give 'schema: "):
        AppConfig.from_dict(doc)
    doc["formats"] = {"odd": {"format": "protobuf", "schema": {"p": "double"}}}
    assert AppConfig.from_dict(doc).formats["formats"]["odd"]["schema"] == {"p": "double"}


@pytest.mark.parametrize("fmt", ["avro", "json-schema", "protobuf"])
def test_kepl_send_writes_the_types_format(
        fmt: str, kafka_bootstrap: str, schema_registry: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"send-{fmt}-{uuid.uuid4().hex[:6]}"
    doc = {**_doc(name), "registry": schema_registry, "formats": {"Withdrawal": fmt}}
    f = tmp_path / "app.yaml"
    f.write_text(yaml.safe_dump(doc))
    events = [{"account": "A", "amount": 250.5, "note": "x"},
              {"account": "B", "amount": 7, "note": None}]
    assert main(["send", str(f), "Withdrawal", *map(json.dumps, events),
                 "--bootstrap", kafka_bootstrap]) == 0
    assert capsys.readouterr().out == f"sent 2 event(s) to {name}.withdrawal\n"
    topic = f"{name}.withdrawal"
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "kepl-test-send"})
    c.assign([TopicPartition(topic, 0, 0)])
    values = [c.poll(10).value() for _ in events]
    c.close()
    reg = SchemaRegistryClient({"url": schema_registry})
    latest = reg.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == {"avro": "AVRO", "json-schema": "JSON",
                                         "protobuf": "PROTOBUF"}[fmt]
    assert all(v[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big") for v in values)
    if fmt == "avro":
        de = AvroDeserializer(reg)
        ctx = SerializationContext(topic, MessageField.VALUE)
        got = [de(v, ctx) for v in values]
    else:
        dec = formats.decoders(AppConfig.from_dict(doc).formats, {"Withdrawal": topic})[topic]
        got = [dec(v) for v in values]
    assert got == events
    bad = main(["send", str(f), "Withdrawal", '{"account": 3, "amount": 1.5}',
                "--bootstrap", kafka_bootstrap])
    assert bad == 2
    assert "event 1 not sent (nothing was)" in capsys.readouterr().err
