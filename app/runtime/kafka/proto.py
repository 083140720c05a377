"""Protobuf records without generated classes: a small reader of ``.proto`` (proto3)
text into message descriptions, and the wire format of their scalar fields.

The parser is a hand-written tokenizer and recursive descent over the part of proto3
that describes records (``syntax``, ``package``, ``import``/``option`` skipped,
``message`` with scalar, enum and nested message fields, ``reserved``, ``oneof``); the
EPL grammar stays the project's one grammar file.  Decoding and encoding follow the
protobuf encoding guide: varints, 64-bit and 32-bit little-endian fixed fields,
length-delimited strings and nested messages.  Within the Confluent wire format a value
is ``0, schema id, message indexes, body`` (the indexes as zigzag varints, ``[0]``
written as the single byte 0).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ProtoError(ValueError):
    """The ``.proto`` text cannot be read, or a value does not fit its field."""


SCALARS = {
    # proto type -> (kepl type, wire type)
    "string": ("string", 2), "bytes": (None, 2),
    "int32": ("int", 0), "int64": ("long", 0), "uint32": ("long", 0), "uint64": ("long", 0),
    "sint32": ("int", 0), "sint64": ("long", 0), "bool": ("boolean", 0),
    "double": ("double", 1), "fixed64": ("long", 1), "sfixed64": ("long", 1),
    "float": ("float", 5), "fixed32": ("long", 5), "sfixed32": ("int", 5),
}
PROTO_OF = {"string": "string", "int": "int32", "long": "int64", "double": "double",
            "float": "float", "boolean": "bool"}
"""The proto3 type an output column of each kepl type is written as."""


@dataclass
class Field:
    name: str
    number: int
    type: str
    optional: bool = False
    repeated: bool = False


@dataclass
class Message:
    name: str
    fields: list[Field] = field(default_factory=list)
    nested: list[Message] = field(default_factory=list)
    enums: set[str] = field(default_factory=set)


@dataclass
class ProtoFile:
    package: str
    messages: list[Message]

    def message_at(self, indexes: list[int]) -> Message:
        """The message a Confluent message-index path names (top level, then nested)."""
        msgs = self.messages
        msg = None
        for i in indexes:
            if not 0 <= i < len(msgs):
                raise ProtoError(f"message index {indexes} names no message of the schema")
            msg = msgs[i]
            msgs = msg.nested
        if msg is None:
            raise ProtoError("the schema has no message")
        return msg


# -- .proto text ---------------------------------------------------------------------

_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|(?P<t>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'
                    |[A-Za-z_][A-Za-z0-9_.]*|-?[0-9][0-9A-Za-z_.+-]*|[{}\[\]();=<>,.-])""",
                    re.S | re.X)


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            raise ProtoError(f"line {line}: cannot read {text[pos:pos + 20]!r}")
        if m.group("t"):
            out.append(m.group("t"))
        pos = m.end()
    return out


def parse(text: str) -> ProtoFile:
    """The messages of a proto3 file; proto2 and services are refused or skipped."""
    toks = _tokens(text)
    p = _Parser(toks)
    package = ""
    messages: list[Message] = []
    while not p.done():
        t = p.next()
        if t == "syntax":
            p.expect("=")
            if p.next().strip("\"'") != "proto3":
                raise ProtoError("only proto3 schemas are read")
            p.expect(";")
        elif t == "package":
            package = p.next()
            p.expect(";")
        elif t in ("import", "option"):
            p.skip_statement()
        elif t == "message":
            messages.append(p.message())
        elif t in ("enum", "service", "extend"):
            p.next()
            p.skip_block()
        elif t != ";":
            raise ProtoError(f"unexpected {t!r} at the top level")
    return ProtoFile(package, messages)


class _Parser:
    def __init__(self, toks: list[str]) -> None:
        self.toks = toks
        self.i = 0

    def done(self) -> bool:
        return self.i >= len(self.toks)

    def next(self) -> str:
        if self.done():
            raise ProtoError("the schema text ends early")
        self.i += 1
        return self.toks[self.i - 1]

    def peek(self) -> str:
        return self.toks[self.i] if not self.done() else ""

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise ProtoError(f"expected {tok!r}, got {got!r}")

    def skip_statement(self) -> None:
        while self.next() != ";":
            pass

    def skip_block(self) -> None:
        self.expect("{")
        depth = 1
        while depth:
            t = self.next()
            depth += (t == "{") - (t == "}")

    def message(self) -> Message:
        msg = Message(self.next())
        self.expect("{")
        self.body(msg, "}")
        return msg

    def body(self, msg: Message, end: str) -> None:
        while (t := self.next()) != end:
            if t == "message":
                msg.nested.append(self.message())
            elif t == "enum":
                msg.enums.add(self.next())
                self.skip_block()
            elif t == "oneof":
                self.next()
                self.expect("{")
                self.body(msg, "}")
            elif t in ("option", "reserved", "extensions"):
                self.skip_statement()
            elif t == "map":
                raise ProtoError(f"message {msg.name}: map fields are not read")
            elif t != ";":
                self.field(msg, t)

    def field(self, msg: Message, first: str) -> None:
        optional = repeated = False
        t = first
        if t in ("optional", "repeated", "required"):
            if t == "required":
                raise ProtoError("'required' is proto2; only proto3 schemas are read")
            optional, repeated = t == "optional", t == "repeated"
            t = self.next()
        name = self.next()
        self.expect("=")
        try:
            number = int(self.next(), 0)
        except ValueError:
            raise ProtoError(f"message {msg.name}: field {name} has no number") from None
        if self.peek() == "[":
            while self.next() != "]":
                pass
        self.expect(";")
        msg.fields.append(Field(name, number, t, optional, repeated))


def render(message: str, columns: dict[str, str], package: str = "kepl") -> str:
    """A proto3 file of one message whose fields are ``columns`` (name -> kepl type),
    numbered in order and all ``optional`` (a null column is an absent field)."""
    lines = ['syntax = "proto3";', f"package {package};", "", f"message {message} {{"]
    for n, (name, t) in enumerate(columns.items(), 1):
        lines.append(f"  optional {PROTO_OF[t]} {name} = {n};")
    return "\n".join([*lines, "}", ""])


def _resolve(pf: ProtoFile, msg: Message, type_name: str, scope: list[Message]
             ) -> Message | str | None:
    """A field's type: a scalar name, 'enum', a message, or None when unknown."""
    if type_name in SCALARS:
        return type_name
    short = type_name.lstrip(".").split(".")[-1]
    for m in reversed(scope):
        if short in m.enums:
            return "enum"
        for n in m.nested:
            if n.name == short:
                return n
    for m in pf.messages:
        if m.name == short:
            return m
    return None


def properties(pf: ProtoFile, msg: Message) -> dict[str, str | None]:
    """Field name -> kepl type (None for a field no kepl type holds: bytes, a nested
    message, a repeated field)."""
    out: dict[str, str | None] = {}
    for f in msg.fields:
        r = _resolve(pf, msg, f.type, [msg])
        if f.repeated or not isinstance(r, str):
            out[f.name] = None
        else:
            out[f.name] = "int" if r == "enum" else SCALARS[r][0]
    return out


# -- the wire format ------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtoError("a varint longer than 10 bytes")


def message_indexes(buf: bytes, pos: int) -> tuple[list[int], int]:
    """The Confluent message-index array at ``pos``: a zigzag count, then that many
    zigzag indexes; a count of 0 is ``[0]``, the first message."""
    n, pos = _varint(buf, pos)
    n = (n >> 1) ^ -(n & 1)
    if n == 0:
        return [0], pos
    out = []
    for _ in range(n):
        v, pos = _varint(buf, pos)
        out.append((v >> 1) ^ -(v & 1))
    return out, pos


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


_DEFAULTS = {"string": "", "bytes": b"", "bool": False, "double": 0.0, "float": 0.0}
_CONVERT: dict[str, Callable[[int], Any]] = {
    "int32": _signed32, "int64": _signed64, "uint32": lambda v: v & 0xFFFFFFFF,
    "uint64": lambda v: v, "sint32": lambda v: (v >> 1) ^ -(v & 1),
    "sint64": lambda v: (v >> 1) ^ -(v & 1), "bool": bool, "enum": _signed32}
_FIXED = {"double": ("<d", 8), "fixed64": ("<Q", 8), "sfixed64": ("<q", 8),
          "float": ("<f", 4), "fixed32": ("<I", 4), "sfixed32": ("<i", 4)}


def reader(pf: ProtoFile, msg: Message) -> Callable[[bytes, int, int], dict[str, Any]]:
    """A reader of ``msg``'s body between two offsets into a dict of every field (a
    proto3 field without presence that is absent is its default; an ``optional`` one is
    None; unknown fields are skipped, as protobuf's parsers do)."""
    plan: dict[int, tuple[str, str, Any]] = {}
    defaults: dict[str, Any] = {}
    for f in msg.fields:
        r = _resolve(pf, msg, f.type, [msg])
        if r is None:
            raise ProtoError(f"message {msg.name}: field {f.name} has unknown type {f.type}")
        kind = "message" if isinstance(r, Message) else r
        sub = reader(pf, r) if isinstance(r, Message) else None
        plan[f.number] = (f.name, "repeated" if f.repeated else kind,
                          (kind, sub) if f.repeated else sub)
        defaults[f.name] = ([] if f.repeated else None if f.optional or sub is not None
                            else _DEFAULTS.get(kind, 0))

    def read_one(kind: str, sub: Any, wt: int, buf: bytes, pos: int) -> tuple[Any, int]:
        if wt == 0:
            v, pos = _varint(buf, pos)
            conv = _CONVERT.get(kind)
            return (conv(v) if conv else v), pos
        if wt == 2:
            n = buf[pos]
            if n < 0x80:  # a length under 128: one byte
                pos += 1
            else:
                n, pos = _varint(buf, pos)
            end = pos + n
            if end > len(buf):
                raise ProtoError("a length-delimited field runs past the record")
            if kind == "string":
                return buf[pos:end].decode(), end
            if kind == "message":
                return sub(buf, pos, end), end
            return bytes(buf[pos:end]), end
        fmt, size = _FIXED.get(kind) or (("<Q", 8) if wt == 1 else ("<I", 4))
        if pos + size > len(buf):
            raise ProtoError("a fixed-width field runs past the record")
        return struct.unpack_from(fmt, buf, pos)[0], pos + size

    def read(buf: bytes, pos: int, end: int) -> dict[str, Any]:
        out = dict(defaults)
        while pos < end:
            tag = buf[pos]
            if tag < 0x80:  # field numbers up to 15: a one-byte tag
                pos += 1
            else:
                tag, pos = _varint(buf, pos)
            wt = tag & 7
            spec = plan.get(tag >> 3)
            if spec is None:
                pos = _skip(buf, pos, wt)
                continue
            name, kind, sub = spec
            if kind == "repeated":
                ekind, esub = sub
                if wt == 2 and ekind not in ("string", "bytes", "message"):
                    n, pos = _varint(buf, pos)  # packed
                    stop = pos + n
                    ewt = 1 if ekind in _FIXED and _FIXED[ekind][1] == 8 else (
                        5 if ekind in _FIXED else 0)
                    while pos < stop:
                        v, pos = read_one(ekind, esub, ewt, buf, pos)
                        out[name] = [*out[name], v]
                    continue
                v, pos = read_one(ekind, esub, wt, buf, pos)
                out[name] = [*out[name], v]
                continue
            out[name], pos = read_one(kind, sub, wt, buf, pos)
        if pos != end:
            raise ProtoError("a field runs past the record")
        return out

    return read


def _skip(buf: bytes, pos: int, wt: int) -> int:
    if wt == 0:
        return _varint(buf, pos)[1]
    if wt == 1:
        return pos + 8
    if wt == 5:
        return pos + 4
    if wt == 2:
        n, pos = _varint(buf, pos)
        return pos + n
    raise ProtoError(f"wire type {wt} is not read")


def _put_varint(z: int) -> bytes:
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _int_of(v: Any) -> int:
    if type(v) is int or type(v) is bool:
        return int(v)
    if type(v) is float and v.is_integer():
        return int(v)
    raise TypeError(v)


def _w_int32(v: Any) -> bytes:
    n = _int_of(v)
    if not -(1 << 31) <= n < (1 << 31):
        raise OverflowError(n)
    return _put_varint(n & 0xFFFFFFFFFFFFFFFF)


def _w_int64(v: Any) -> bytes:
    n = _int_of(v)
    if not -(1 << 63) <= n < (1 << 63):
        raise OverflowError(n)
    return _put_varint(n & 0xFFFFFFFFFFFFFFFF)


def _w_string(v: Any) -> bytes:
    if type(v) is not str:
        raise TypeError(v)
    data = v.encode()
    return _put_varint(len(data)) + data


def encode_double(v: Any) -> bytes:
    """A double as 8 little-endian IEEE bytes (Protobuf and Avro write it alike)."""
    if type(v) not in (float, int):
        raise TypeError(v)
    return struct.pack("<d", v)


def encode_float(v: Any) -> bytes:
    """A float as 4 little-endian IEEE bytes (Protobuf and Avro write it alike)."""
    if type(v) not in (float, int):
        raise TypeError(v)
    return struct.pack("<f", v)


def _w_bool(v: Any) -> bytes:
    if type(v) is not bool:
        raise TypeError(v)
    return b"\x01" if v else b"\x00"


_WRITERS = {"int32": (0, _w_int32), "int64": (0, _w_int64), "string": (2, _w_string),
            "double": (1, encode_double), "float": (5, encode_float), "bool": (0, _w_bool)}


def writer(msg: Message, where: str = "") -> Callable[[Any], bytes]:
    """A writer of a row (dict) as ``msg``'s body, scalar fields only: a None column is
    left out (absent: null for an ``optional`` field).  A value its field cannot hold
    raises ``ValueError`` naming the column."""
    fields = []
    for f in msg.fields:
        if f.type not in _WRITERS or f.repeated:
            raise ProtoError(f"message {msg.name}: field {f.name} ({f.type}) is not written "
                             f"(one of {', '.join(_WRITERS)})")
        wt, put = _WRITERS[f.type]
        fields.append((f.name, _put_varint(f.number << 3 | wt), put))

    def write(row: Any) -> bytes:
        out = []
        get = row.get
        for name, tag, put in fields:
            v = get(name)
            if v is None:
                continue
            try:
                out.append(tag + put(v))
            except (TypeError, ValueError, OverflowError, struct.error):
                raise ValueError(f"{where}: column '{name}' holds {v!r}, which its Protobuf "
                                 "field cannot") from None
        return b"".join(out)

    return write
