"""Record formats of source and output topics: JSON (the default), or Avro, JSON Schema
or Protobuf in the Confluent wire format (magic byte 0, a 4-byte schema id, the Avro
body, the JSON text, or the message indexes and the Protobuf message), with a schema
registry through ``confluent_kafka.schema_registry``'s client (fastavro for Avro bodies,
``proto`` for proto3 schemas and Protobuf bodies).

The statement file says which topics are Avro and where the registry is::

    registry: http://127.0.0.1:8081/apis/ccompat/v7   # else $KEPL_REGISTRY_URL
    schemas:
      Withdrawal: {subject: withdrawals-value}        # properties from the registry
    formats:
      Withdrawal: avro                                # its topic's records are Avro
      big: {format: avro, schema: {account: string, amount: double}}   # an output

An event type's records are read with the writer schema their id names (any schema
the registry holds for them); an output's schema is the ``schema`` given (property ->
type, as in ``schemas``; or the name of an event type whose properties it has), else the
statement's select columns with their types (``output_columns``), every field nullable,
registered under ``<topic>-value`` at deploy and on first use.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable
from typing import Any

from app.runtime.kafka import codec, proto

REGISTRY_ENV = "KEPL_REGISTRY_URL"
FORMATS = ("json", "avro", "json-schema", "protobuf")
"""``json-schema``: JSON text behind the Confluent framing, its schema a JSON Schema;
``protobuf``: a proto3 message behind the framing and its message indexes."""
KEPL_TYPES = ("string", "int", "long", "double", "float", "boolean")
_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_AVRO_OF = {"string": "string", "int": "int", "long": "long", "double": "double",
            "float": "float", "boolean": "boolean"}
_KEPL_OF = {"string": "string", "int": "int", "long": "long", "double": "double",
            "float": "float", "boolean": "boolean", "enum": "string"}

_registry_url: str | None = None
"""The registry of the statement file loaded last in this process (readers use it)."""


class FormatError(ValueError):
    """The ``formats``/``registry`` section, or a subject it names, cannot be used."""


def registry_url(doc: dict[str, Any] | None = None) -> str | None:
    """The registry a statement file names, else ``$KEPL_REGISTRY_URL``."""
    url = (doc or {}).get("registry") or _registry_url or os.environ.get(REGISTRY_ENV)
    return str(url).rstrip("/") if url else None


def client(url: str) -> Any:
    """A Schema Registry client (cached per URL: it caches schemas by id)."""
    c = _clients.get(url)
    if c is None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        c = _clients[url] = SchemaRegistryClient({"url": url})
    return c


_clients: dict[str, Any] = {}
named_subjects: dict[tuple[str, str], str] = {}
"""(registry, source topic) -> the subject an event type's ``schemas`` entry named
(``prepare``)."""


# -- the statement file -------------------------------------------------------------

def prepare(doc: Any) -> Any:
    """The statement file with every ``schemas`` entry that names a registry subject
    replaced by the subject's properties, and its ``formats`` checked; a problem is a
    one-line ``FormatError``.  A file with neither is returned as it is."""
    if not isinstance(doc, dict):
        return doc
    schemas = doc.get("schemas")
    subjects = ({t: s["subject"] for t, s in schemas.items()
                 if isinstance(s, dict) and set(s) == {"subject"}
                 and s["subject"] not in KEPL_TYPES}
                if isinstance(schemas, dict) else {})
    if not subjects and "formats" not in doc and "registry" not in doc:
        return doc
    global _registry_url
    url = registry_url(doc)
    if doc.get("registry"):
        _registry_url = url
    if subjects:
        if url is None:
            raise FormatError(f"schemas.{next(iter(subjects))} names a registry subject but "
                              f"no registry is given ('registry:' or ${REGISTRY_ENV})")
        topics = doc.get("topics") or {}
        named_subjects.update({(url, str(topics.get(t, t))): str(s)
                               for t, s in subjects.items()})
        doc = {**doc, "schemas": {t: (subject_properties(url, str(subjects[t]), t)
                                      if t in subjects else p)
                                  for t, p in schemas.items()}}
    check_formats(doc)
    return doc


def section(doc: dict[str, Any]) -> dict[str, Any]:
    """What a worker needs of a prepared file: the registry and the formats, each Avro
    output's schema spelled out (``AppConfig.formats``; empty for an all-JSON app)."""
    raw = doc.get("formats") or {}
    if not raw and not doc.get("registry"):
        return {}
    out: dict[str, Any] = {}
    for name, spec in raw.items():
        fmt = spec.get("format") if isinstance(spec, dict) else spec
        if fmt != "json" and name not in (doc.get("schemas") or {}):
            fields = output_schema(doc, name)["fields"]
            out[name] = {"format": fmt, "schema": {f["name"]: f["type"][1] for f in fields}}
        else:
            out[name] = fmt
    return {**({"registry": doc["registry"]} if doc.get("registry") else {}), "formats": out}


def check_formats(doc: dict[str, Any]) -> None:
    """The ``formats`` section: keys are event types or statement names, values a format
    (an output's with an Avro ``schema``); all types of one topic share a format."""
    raw = doc.get("formats") or {}
    if not isinstance(raw, dict):
        raise FormatError("'formats' must map event types and statement names to a format")
    schemas = doc.get("schemas") or {}
    stmts = {str(s.get("name") or f"s{i}") for i, s in enumerate(doc.get("statements") or [])
             if isinstance(s, dict)}
    for name, spec in raw.items():
        fmt = spec.get("format") if isinstance(spec, dict) else spec
        if fmt not in FORMATS:
            raise FormatError(f"formats.{name}: format must be one of {', '.join(FORMATS)}, "
                              f"got {fmt!r}")
        if name in schemas and name in stmts:
            raise FormatError(f"formats.{name}: names both an event type and a statement")
        if name in schemas:
            if isinstance(spec, dict) and set(spec) - {"format"}:
                raise FormatError(f"formats.{name}: an event type's records carry their "
                                  "schema id; give only its format")
        elif name in stmts:
            if fmt != "json":
                output_schema(doc, name)
        else:
            raise FormatError(f"formats.{name}: no event type or statement of that name")
        if fmt != "json" and registry_url(doc) is None:
            raise FormatError(f"formats.{name}: {fmt} needs a schema registry ('registry:' "
                              f"or ${REGISTRY_ENV})")
    topics = doc.get("topics") or {}
    by_topic: dict[str, set[str]] = {}
    for t in schemas:
        by_topic.setdefault(str(topics.get(t, t)), set()).add(input_format(doc, t))
    for topic, fmts in by_topic.items():
        if len(fmts) > 1:
            raise FormatError(f"topic {topic}: its event types have different formats "
                              f"({', '.join(sorted(fmts))})")


def input_format(doc: dict[str, Any], type_name: str) -> str:
    spec = (doc.get("formats") or {}).get(type_name, "json")
    return spec.get("format", "json") if isinstance(spec, dict) else spec


def output_schema(doc: dict[str, Any], stmt: str) -> dict[str, Any]:
    """The Avro record schema of a statement's output rows (every field nullable)."""
    spec = (doc.get("formats") or {}).get(stmt)
    given = spec.get("schema") if isinstance(spec, dict) else None
    if isinstance(given, str):
        given = (doc.get("schemas") or {}).get(given)
        if given is None:
            raise FormatError(f"formats.{stmt}.schema: no event type "
                              f"'{spec['schema']}'")  # type: ignore[index]
    if given is None:
        given = _select_columns(doc, stmt)
    if not isinstance(given, dict) or not given:
        raise FormatError(f"formats.{stmt}.schema: give the output's properties "
                          "(property: type, or an event type's name)")
    fields = []
    for prop, t in given.items():
        if not _AVRO_NAME.match(str(prop)):
            raise FormatError(f"formats.{stmt}.schema: '{prop}' is not an Avro field name "
                              "(alias the column: select ... as name)")
        if t not in _AVRO_OF:
            raise FormatError(f"formats.{stmt}.schema.{prop}: type must be one of "
                              f"{', '.join(KEPL_TYPES)}, got {t!r}")
        fields.append({"name": str(prop), "type": ["null", _AVRO_OF[t]], "default": None})
    return {"type": "record", "name": _record_name(stmt),
            "namespace": "kepl", "fields": fields}


def _select_columns(doc: dict[str, Any], stmt: str) -> dict[str, str]:
    """The output columns of statement ``stmt`` of the file and their types, from its
    select clause (``output_columns``)."""
    from app.epl.errors import EplError
    from app.runtime.kafka.output_columns import NotEvident, select_columns

    epl = next((str(s.get("epl") or "") for i, s in enumerate(doc.get("statements") or [])
                if isinstance(s, dict) and str(s.get("name") or f"s{i}") == stmt), "")
    schemas = {t: p for t, p in (doc.get("schemas") or {}).items() if isinstance(p, dict)}
    try:
        return select_columns(epl, schemas)
    except (NotEvident, EplError) as e:
        raise FormatError(f"formats.{stmt}: no schema given and none follows from the "
                          f"select clause ({e}); give 'schema: {{property: type}}'") from None


def _record_name(stmt: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", stmt)
    return name if _AVRO_NAME.match(name) else f"_{name}"


def subject_properties(url: str, subject: str, type_name: str) -> dict[str, str]:
    """The kepl properties of the newest Avro record schema of a registry subject."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        reg = client(url).get_latest_version(subject)
    except SchemaRegistryError as e:
        raise FormatError(f"schemas.{type_name}: subject '{subject}': "
                          f"{e.error_message} (registry {url})") from None
    except Exception as e:  # noqa: BLE001 - connection refused, time-out: one line
        raise FormatError(f"schemas.{type_name}: registry {url} does not answer: "
                          f"{type(e).__name__}: {e}") from None
    schema = reg.schema
    where = f"schemas.{type_name}: subject '{subject}'"
    kind = schema.schema_type or "AVRO"
    if kind == "JSON":
        return json_schema_properties(json.loads(schema.schema_str), where)
    if kind == "PROTOBUF":
        return protobuf_properties(schema.schema_str, where)
    if kind != "AVRO":
        raise FormatError(f"{where} holds a {kind} schema; Avro, JSON Schema and "
                          "Protobuf are read")
    return avro_properties(json.loads(schema.schema_str), where)


_KEPL_OF_JSON = {"string": "string", "integer": "long", "number": "double",
                 "boolean": "boolean"}
_JSON_OF = {"string": "string", "int": "integer", "long": "integer", "double": "number",
            "float": "number", "boolean": "boolean"}


def json_schema_properties(schema: Any, where: str) -> dict[str, str]:
    """Property -> kepl type of an object JSON Schema (``[T, "null"]`` is T; integer is
    long, number double)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise FormatError(f"{where}: not a JSON Schema of an object with properties")
    out = {}
    for name, p in schema["properties"].items():
        t = p.get("type") if isinstance(p, dict) else None
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            t = rest[0] if len(rest) == 1 else None
        kt = _KEPL_OF_JSON.get(t) if isinstance(t, str) else None
        if kt is None:
            raise FormatError(f"{where}: property '{name}' has JSON Schema {json.dumps(p)}, "
                              f"which no kepl property type holds ({', '.join(KEPL_TYPES)})")
        out[name] = kt
    return out


def protobuf_properties(text: str, where: str) -> dict[str, str]:
    """Property -> kepl type of the first message of a proto3 schema (the message a
    Confluent producer writes by default; int32 is int, int64 long, bool boolean)."""
    try:
        pf = proto.parse(text)
        props = proto.properties(pf, pf.message_at([0]))
    except proto.ProtoError as e:
        raise FormatError(f"{where}: {e}") from None
    for name, t in props.items():
        if t is None:
            raise FormatError(f"{where}: field '{name}' of message {pf.messages[0].name} "
                              "has a type no kepl property type holds "
                              f"({', '.join(KEPL_TYPES)})")
    return {k: str(v) for k, v in props.items()}


def output_proto(doc: dict[str, Any], stmt: str) -> str:
    """The proto3 schema of a statement's output rows: one message named for the
    statement, a field per column, all ``optional`` (a null column is absent)."""
    fields = output_schema(doc, stmt)["fields"]
    return proto.render(_record_name(stmt), {f["name"]: _KEPL_OF[f["type"][1]]
                                             for f in fields})


def output_json_schema(doc: dict[str, Any], stmt: str) -> dict[str, Any]:
    """The JSON Schema of a statement's output rows (every property nullable)."""
    fields = output_schema(doc, stmt)["fields"]
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": stmt,
            "type": "object", "properties": {
                f["name"]: {"type": [_JSON_OF[f["type"][1]], "null"]} for f in fields}}


def avro_properties(avro: Any, where: str) -> dict[str, str]:
    """Property -> kepl type of an Avro record schema (``["null", T]`` is T)."""
    if not isinstance(avro, dict) or avro.get("type") != "record":
        raise FormatError(f"{where}: not an Avro record schema")
    out = {}
    for f in avro.get("fields", []):
        t = f["type"]
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            t = rest[0] if len(rest) == 1 else t
        if isinstance(t, dict):
            t = t.get("type") if t.get("type") in ("enum",) or "logicalType" in t else t
        kt = _KEPL_OF.get(t) if isinstance(t, str) else None
        if kt is None:
            raise FormatError(f"{where}: field '{f['name']}' has Avro type "
                              f"{json.dumps(f['type'])}, which no kepl property type holds "
                              f"({', '.join(KEPL_TYPES)})")
        out[f["name"]] = kt
    return out


# -- the data plane -----------------------------------------------------------------

Decoder = Callable[[bytes], Any]
Encoder = Callable[[Any], tuple[bytes, bytes | None]]


def decoders(formats: dict[str, Any], topics: dict[str, str]) -> dict[str, Decoder]:
    """Source topic -> a decoder of its records' values, for the non-JSON topics."""
    out: dict[str, Decoder] = {}
    for t, topic in topics.items():
        fmt = input_format(formats, t)
        if fmt == "avro":
            out[topic] = avro_decoder(registry_url(formats) or "", topic)
        elif fmt == "json-schema":
            out[topic] = framed_json_decoder
        elif fmt == "protobuf":
            out[topic] = protobuf_decoder(registry_url(formats) or "")
    return out


def protobuf_decoder(url: str) -> Decoder:
    """A decoder of Confluent-framed Protobuf values: the schema of each id is fetched
    and parsed once, a reader kept per message-index path; what does not decode raises
    ``ValueError`` saying why."""
    reg = client(url)
    files: dict[int, proto.ProtoFile] = {}
    readers: dict[tuple[int, tuple[int, ...]], Callable[[bytes, int, int], Any]] = {}

    def decode(value: bytes) -> Any:
        if value[:1] != b"\x00" or len(value) < 6:
            raise ValueError("not Protobuf in the Confluent wire format (no magic byte 0, "
                             "schema id and message indexes)")
        sid = int.from_bytes(value[1:5], "big")
        try:
            if value[5] == 0:
                key, pos = (sid, (0,)), 6
            else:
                idx, pos = proto.message_indexes(value, 5)
                key = (sid, tuple(idx))
            read = readers.get(key)
            if read is None:
                pf = files.get(sid)
                if pf is None:
                    pf = files[sid] = proto.parse(reg.get_schema(sid).schema_str)
                read = readers[key] = proto.reader(pf, pf.message_at(list(key[1])))
            return read(value, pos, len(value))
        except Exception as e:  # noqa: BLE001 - a truncated or foreign body: one reason
            raise ValueError(f"not Protobuf of schema id {sid}: {type(e).__name__}: "
                             f"{e}") from None

    return decode


def framed_json_decoder(value: bytes) -> Any:
    """The JSON text behind the Confluent framing (magic byte 0, a schema id); the
    event type's check is the validation (``event_coercer``)."""
    if value[:1] != b"\x00" or len(value) < 5:
        raise ValueError("not JSON Schema-framed JSON (no magic byte 0 and schema id)")
    try:
        return codec.loads(value[5:])
    except codec.NotText:
        raise
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None


def avro_decoder(url: str, topic: str) -> Decoder:
    """A decoder of Confluent-framed Avro values of ``topic``: the writer schema of each
    id is fetched from the registry once (the client's ``get_schema``, as the
    deserializer does) and the body read with fastavro; what does not decode raises
    ``ValueError`` saying why.  The framing is read here rather than by
    ``AvroDeserializer``, whose per-record bookkeeping costs several times the decode."""
    import io

    from fastavro import parse_schema, schemaless_reader

    reg = client(url)
    parsed: dict[int, Any] = {}

    def decode(value: bytes) -> Any:
        if value[:1] != b"\x00" or len(value) < 5:
            raise ValueError("not Avro in the Confluent wire format (no magic byte 0 and "
                             "schema id)")
        sid = int.from_bytes(value[1:5], "big")
        schema = parsed.get(sid)
        try:
            if schema is None:
                schema = parsed[sid] = parse_schema(json.loads(reg.get_schema(sid).schema_str))
            return schemaless_reader(io.BytesIO(value[5:]), schema, None)
        except Exception as e:  # noqa: BLE001 - a truncated or foreign body: one reason
            raise ValueError(f"not Avro of schema id {sid}: {type(e).__name__}: "
                             f"{e}") from None

    return decode


def encoders(formats: dict[str, Any], outputs: dict[str, str]) -> dict[str, Encoder]:
    """Output topic -> a row encoder, for the statements whose output is not JSON
    (``outputs``: statement -> its output topic)."""
    out: dict[str, Encoder] = {}
    for stmt, topic in outputs.items():
        spec = (formats.get("formats") or {}).get(stmt)
        fmt = spec.get("format") if isinstance(spec, dict) else spec
        if fmt == "avro":
            out[topic] = avro_encoder(registry_url(formats) or "", topic,
                                      output_schema(formats, stmt))
        elif fmt == "json-schema":
            out[topic] = framed_json_encoder(registry_url(formats) or "", topic,
                                             output_json_schema(formats, stmt))
        elif fmt == "protobuf":
            out[topic] = protobuf_encoder(registry_url(formats) or "", topic,
                                          output_proto(formats, stmt))
    return out


def protobuf_encoder(url: str, topic: str, text: str) -> Encoder:
    """An encoder of rows as Confluent-framed Protobuf of the first message of ``text``
    (a proto3 schema registered under ``<topic>-value`` at the first row): the magic
    byte, the id, the message index ``[0]`` (one byte 0), the body."""
    from confluent_kafka.schema_registry import Schema

    body = proto.writer(proto.parse(text).message_at([0]), topic)
    header: list[bytes] = []

    def encode(row: Any) -> tuple[bytes, None]:
        if not header:
            sid = client(url).register_schema(f"{topic}-value", Schema(text, "PROTOBUF"))
            header.append(b"\x00" + sid.to_bytes(4, "big") + b"\x00")
        return header[0] + body(row), None

    return encode


def framed_json_encoder(url: str, topic: str, schema: dict[str, Any]) -> Encoder:
    """An encoder of rows as JSON text behind the Confluent framing, the id that of
    ``schema`` (a JSON Schema) under ``<topic>-value``; the ``kepl.nonfinite`` header
    as for JSON rows."""
    from confluent_kafka.schema_registry import Schema

    text = json.dumps(schema)
    header: list[bytes] = []

    def encode(row: Any) -> tuple[bytes, bytes | None]:
        if not header:
            sid = client(url).register_schema(f"{topic}-value", Schema(text, "JSON"))
            header.append(b"\x00" + sid.to_bytes(4, "big"))
        data, nonfinite = codec.encode_row(row)
        return header[0] + data, nonfinite

    return encode


def avro_encoder(url: str, topic: str, schema: dict[str, Any]) -> Encoder:
    """An encoder of rows as Confluent-framed Avro of an output schema: registered
    under ``<topic>-value`` at the first row (the id deploy got, when it registered it),
    each row's body written by ``row_writer`` behind the magic byte and the id."""
    from confluent_kafka.schema_registry import Schema

    body = row_writer(schema, topic)
    text = json.dumps(schema)
    header: list[bytes] = []

    def encode(row: Any) -> tuple[bytes, None]:
        if not header:
            sid = client(url).register_schema(f"{topic}-value", Schema(text, "AVRO"))
            header.append(b"\x00" + sid.to_bytes(4, "big"))
        return header[0] + body(row), None

    return encode


def row_writer(schema: dict[str, Any], topic: str = "") -> Callable[[Any], bytes]:
    """Avro's binary encoding of a row for a record of nullable primitives (as
    ``output_schema`` makes them), field by field: a few times cheaper than a generic
    writer.  A value the field's type cannot hold raises ``ValueError`` naming it."""
    fields = [(f["name"], _WRITERS[f["type"][1]]) for f in schema["fields"]]

    def write(row: Any) -> bytes:
        out = []
        get = row.get
        for name, put in fields:
            v = get(name)
            if v is None:
                out.append(b"\x00")  # union branch 0: null
                continue
            try:
                out.append(b"\x02" + put(v))  # union branch 1: the type
            except (TypeError, ValueError, OverflowError, struct.error):
                raise ValueError(f"{topic}: column '{name}' holds {v!r}, which its Avro "
                                 "field cannot (formats: schema)") from None
        return b"".join(out)

    return write


def _varint_long(n: int) -> bytes:
    """Avro's zig-zag variable-length encoding of a 64-bit integer."""
    if type(n) is not int:
        if type(n) is float and n.is_integer():
            n = int(n)
        elif type(n) is not bool:
            raise TypeError(n)
    if not -(1 << 63) <= n < (1 << 63):
        raise OverflowError(n)
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _string(v: Any) -> bytes:
    if type(v) is not str:
        raise TypeError(v)
    data = v.encode()
    return _varint_long(len(data)) + data


def _int(v: Any) -> bytes:
    if not -(1 << 31) <= v < (1 << 31):
        raise OverflowError(v)
    return _varint_long(v)


def _boolean(v: Any) -> bytes:
    if type(v) is not bool:
        raise TypeError(v)
    return b"\x01" if v else b"\x00"


_WRITERS: dict[str, Callable[[Any], bytes]] = {
    "long": _varint_long, "int": _int, "string": _string, "double": proto.encode_double,
    "float": proto.encode_float, "boolean": _boolean}


def register_outputs(config: Any) -> list[str]:
    """Register the schema of every Avro, JSON Schema or Protobuf output of an ``AppConfig`` under
    ``<topic>-value`` (``kepl deploy``); one line per subject with its id.  A registry
    that refuses is a one-line ``FormatError``."""
    from confluent_kafka.schema_registry import Schema

    fmts = config.formats
    url = registry_url(fmts)
    lines = []
    for s in config.statements:
        spec = (fmts.get("formats") or {}).get(s.name)
        fmt = spec.get("format") if isinstance(spec, dict) else spec
        if fmt == "json" or fmt is None or url is None:
            continue
        subject = f"{config.output_topic(s.name)}-value"
        schema = (Schema(json.dumps(output_schema(fmts, s.name)), "AVRO") if fmt == "avro"
                  else Schema(output_proto(fmts, s.name), "PROTOBUF") if fmt == "protobuf"
                  else Schema(json.dumps(output_json_schema(fmts, s.name)), "JSON"))
        try:
            sid = client(url).register_schema(subject, schema)
        except Exception as e:  # noqa: BLE001 - refused, incompatible, no answer: one line
            raise FormatError(f"registry {url}: cannot register {subject}: "
                              f"{getattr(e, 'error_message', None) or e}") from None
        kind = {"avro": "Avro", "protobuf": "Protobuf"}.get(fmt, "JSON Schema")
        lines.append(f"{subject}: schema id {sid} (statement {s.name}, {kind})")
    return lines


def decode_row(value: bytes, topic: str, nonfinite: bytes | None = None) -> Any:
    """An output row as any format writes it: behind the Confluent framing (byte 0,
    which no JSON text starts with) Avro or JSON by its schema's type, else JSON."""
    if value[:1] != b"\x00":
        return codec.decode_row(value, nonfinite)
    url = registry_url()
    if url is None:
        raise ValueError(f"a framed row of {topic} but no registry (${REGISTRY_ENV})")
    kind = client(url).get_schema(int.from_bytes(value[1:5], "big")).schema_type if len(
        value) >= 5 else None
    if kind == "JSON":
        return codec.decode_row(value[5:], nonfinite)
    dec = _row_decoders.get((url, topic, kind))
    if dec is None:
        dec = _row_decoders[(url, topic, kind)] = (
            protobuf_decoder(url) if kind == "PROTOBUF" else avro_decoder(url, topic))
    return dec(value)


_row_decoders: dict[tuple[str, str, str | None], Decoder] = {}


def event_encoder(doc: dict[str, Any], type_name: str, topic: str
                  ) -> Callable[[Any], bytes] | None:
    """An encoder of events of ``type_name`` in its topic's format (``kepl send``), None
    for JSON: the writer schema is the newest of the subject its ``schemas`` entry named,
    else of ``<topic>-value``, registered from the type's properties (every field
    nullable) when the subject has none yet."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    fmt = input_format(doc, type_name)
    url = registry_url(doc)
    if fmt == "json" or url is None:
        return None
    subject = named_subjects.get((url, topic)) or f"{topic}-value"
    kind = {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}[fmt]
    reg = client(url)
    try:
        try:
            latest = reg.get_latest_version(subject)
            text, sid = latest.schema.schema_str, latest.schema_id
            if (latest.schema.schema_type or "AVRO") != kind:
                raise FormatError(f"subject {subject} holds a {latest.schema.schema_type} "
                                  f"schema; formats.{type_name} is {fmt}")
        except SchemaRegistryError:
            own = {"formats": {type_name: {"schema": (doc.get("schemas") or {})[type_name]}}}
            text = (json.dumps(output_schema(own, type_name)) if fmt == "avro"
                    else output_proto(own, type_name) if fmt == "protobuf"
                    else json.dumps(output_json_schema(own, type_name)))
            sid = reg.register_schema(subject, Schema(text, kind))
    except SchemaRegistryError as e:
        raise FormatError(f"registry {url}: subject {subject}: {e.error_message}") from None
    head = b"\x00" + sid.to_bytes(4, "big")
    if fmt == "json-schema":
        return lambda event: head + codec.dumps(event)
    if fmt == "protobuf":
        try:
            body = proto.writer(proto.parse(text).message_at([0]), subject)
        except proto.ProtoError as e:
            raise FormatError(f"subject {subject}: {e}") from None
        return lambda event: head + b"\x00" + body(event)
    import io

    from fastavro import parse_schema, schemaless_writer

    parsed = parse_schema(json.loads(text))

    def avro(event: Any) -> bytes:
        buf = io.BytesIO()
        try:
            schemaless_writer(buf, parsed, event)
        except Exception as e:  # noqa: BLE001 - fastavro's own words, one line
            raise ValueError(f"not Avro of subject {subject}: {e}") from None
        return head + buf.getvalue()

    return avro
