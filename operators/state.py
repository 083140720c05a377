"""State stores: where operator instances keep their state.

A store hands out hierarchical namespaces (statement / partition / operator).  Keys are
tuples of ints and strings (or a single int/str); values are JSON-shaped data.  Two
stores implement the same protocol: in memory (embedded mode, tests) and RocksDB through
rocksdict (Kafka mode), where every write can also be forwarded to a changelog.
Operators write O(1) keys per event and read their state back only when rebuilt.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson

Key = Any
ChangelogSink = Callable[[bytes, bytes | None], None]

_INT_OFFSET = 1 << 63


def encode_key_part(part: Any) -> bytes:
    """Order-preserving bytes for one key component (ints sort numerically)."""
    t = type(part)
    if t is int:  # the commonest components first (a bool is no int here: below)
        return b"\x02" + (part + _INT_OFFSET).to_bytes(8, "big")
    if t is str:
        return b"\x03" + part.encode().replace(b"\x00", b"\x00\xff") + b"\x00\x00"
    if part is None:
        return b"\x01"
    if isinstance(part, bool):
        part = int(part)
    if isinstance(part, int):
        return b"\x02" + (part + _INT_OFFSET).to_bytes(8, "big")
    if isinstance(part, float):
        bits = struct.unpack(">Q", struct.pack(">d", part))[0]
        bits = bits ^ 0xFFFFFFFFFFFFFFFF if part < 0 else bits | (1 << 63)
        return b"\x04" + bits.to_bytes(8, "big")
    if isinstance(part, str):
        return b"\x03" + part.encode().replace(b"\x00", b"\x00\xff") + b"\x00\x00"
    raise TypeError(f"unsupported key component {part!r}")


_FOUR_INTS = struct.Struct(">BQBQBQBQ").pack
"""A key of four ints, each tagged as ``encode_key_part`` tags it (an event time's held
event: one put and one delete per event)."""


def encode_key(key: Key) -> bytes:
    """Bytes for a key (a tuple of components or a single component)."""
    if isinstance(key, tuple):
        if len(key) == 4:
            a, b, c, d = key
            if type(a) is int and type(b) is int and type(c) is int and type(d) is int:
                o = _INT_OFFSET
                try:
                    return _FOUR_INTS(2, a + o, 2, b + o, 2, c + o, 2, d + o)
                except struct.error:  # beyond 64 bits: encode_key_part says so
                    pass
        return b"".join([encode_key_part(p) for p in key])
    return encode_key_part(key)


def decode_key(data: bytes) -> Key:
    """Inverse of encode_key; single components come back unwrapped."""
    parts: list[Any] = []
    i = 0
    while i < len(data):
        tag = data[i]
        i += 1
        if tag == 1:
            parts.append(None)
        elif tag == 2:
            parts.append(int.from_bytes(data[i : i + 8], "big") - _INT_OFFSET)
            i += 8
        elif tag == 4:
            bits = int.from_bytes(data[i : i + 8], "big")
            bits = bits & ~(1 << 63) if bits & (1 << 63) else bits ^ 0xFFFFFFFFFFFFFFFF
            parts.append(struct.unpack(">d", struct.pack(">Q", bits))[0])
            i += 8
        elif tag == 3:
            # the text ends at the first 00 00; a 00 inside it was written as 00 FF
            j = data.index(b"\x00", i)
            while data[j + 1] != 0:
                j = data.index(b"\x00", j + 2)
            text = data[i:j]
            if text.find(b"\x00") >= 0:
                text = text.replace(b"\x00\xff", b"\x00")
            parts.append(text.decode())
            i = j + 2
        else:
            raise ValueError(f"bad key tag {tag}")
    return parts[0] if len(parts) == 1 else tuple(parts)


def encode_value(value: Any) -> bytes:
    """The one value codec: compact JSON (orjson).  What orjson cannot write as it is
    (NaN and infinities, integer dict keys, integers beyond 64 bits) is written by the
    standard library after a leading space, which ``decode_value`` reads the same way."""
    if type(value) is int and -_I64 <= value < _I64:
        return b"%d" % value  # a row counter: orjson's bytes without its call
    try:
        out = orjson.dumps(value, default=_plain)
    except TypeError:
        return b" " + json.dumps(value, separators=(",", ":"), default=_plain).encode()
    # NaN and infinities are written as ``null`` as None is, one each.  An aggregation's
    # record holds a None at its top level, so its JSON holds one ``null`` on every
    # write: as many as the top level's Nones say none is NaN or infinite.  More are
    # looked at: a value equal to its reading holds neither (the walk costs 5x that).
    # count, not ``in``: ``bytes in bytes`` first tries its operand as an integer, and
    # the TypeError raised and cleared costs more than the search
    nulls = out.count(b"null")
    if (nulls and nulls != _top_nones(value) and orjson.loads(out) != value
            and _non_finite(value)):
        return b" " + json.dumps(value, separators=(",", ":"), default=_plain).encode()
    # a small copy: orjson writes into a 1 KiB C-heap block and shrinks it, and
    # thousands of those held until a commit cost about 1.2 us each in glibc's malloc
    return b"%b" % out


_I64 = 1 << 63


def _plain(value: Any) -> Any:
    """The JSON form of a state object that has one (``plain()``: a sorted bag's list)."""
    plain = getattr(value, "plain", None)
    if plain is None:
        raise TypeError(f"cannot encode {type(value).__name__}")
    return plain()


def decode_value(data: bytes) -> Any:
    if data[:1] == b" ":
        return json.loads(data)
    return orjson.loads(data)


def _decode_values(raws: list[bytes]) -> list[Any]:
    """``decode_value`` of each, in one ``orjson`` call when each is orjson's (none
    written by the standard library after a space; a ", " inside a string only costs the
    slow way)."""
    joined = b",".join(raws)
    if not joined.startswith(b" ") and b", " not in joined:
        return orjson.loads(b"[" + joined + b"]")
    return [decode_value(v) for v in raws]


def _top_nones(value: Any) -> int:
    """How many of a list's or a dict's own items are None (0 for anything else)."""
    t = type(value)
    if t is list:
        return value.count(None)
    if t is dict:
        return [*value.values()].count(None)
    return 0


def _non_finite(value: Any) -> bool:
    """Whether a value holds NaN or an infinity (orjson wrote ``null`` for it): a walk
    over its containers, asked only of values whose JSON holds a ``null``."""
    t = type(value)
    if t is float:
        return value - value != 0.0  # inf - inf and nan - x are nan
    if t is dict:
        value = value.values()
    elif t is not list and t is not tuple:
        if isinstance(value, float):
            return _non_finite(float(value))
        plain = getattr(value, "plain", None)  # a bag, written as its list
        if plain is not None:
            return _non_finite(plain())
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, (list, tuple)):
            return False
    for v in value:
        t = type(v)
        if t is float:
            if v - v != 0.0:
                return True
        elif t is not str and t is not int and v is not None and _non_finite(v):
            return True
    return False


_NO_CHILDREN: Mapping[Any, Any] = MappingProxyType({})


class MemoryNamespace:
    """A namespace held in a Python dict; values are stored as given (no copy).

    An operator whose in-memory structure already is its state may ``own`` the namespace:
    it then writes nothing here, and reads (restore, checkpoint) ask it for its entries.
    """

    __slots__ = ("data", "children", "name", "owner")

    def __init__(self, name: tuple = ()) -> None:
        self.name = name
        self.data: dict[Key, Any] = {}
        self.children: dict[Any, MemoryNamespace] = _NO_CHILDREN  # type: ignore[assignment]
        """Child namespaces by name; a leaf (most of them) shares one empty mapping."""
        self.owner: Any = None

    def own(self, owner: Any) -> None:
        """``owner.entries()`` gives this namespace's entries from now on; the owner has
        loaded whatever the namespace held (a rebuilt operator, its predecessor's)."""
        self.owner = owner
        self.data.clear()

    def entries(self) -> Any:
        """(key, value) pairs held here, in no particular order."""
        if self.owner is None:
            return self.data.items()
        return [*self.data.items(), *self.owner.entries()]

    def get(self, key: Key, default: Any = None) -> Any:
        if self.owner is not None:
            return dict(self.entries()).get(key, default)
        return self.data.get(key, default)

    def put(self, key: Key, value: Any) -> None:
        self.data[key] = value

    def put_new(self, key: Key, value: Any) -> None:
        """``put`` of a key never written before (a window's next sequence number)."""
        self.put(key, value)

    def delete(self, key: Key) -> None:
        self.data.pop(key, None)

    def putter(self, key: Key) -> Callable[[Any], None]:
        """``put(key, value)`` as a function of the value (a key written per event)."""
        if type(self) is not MemoryNamespace:  # a subclass may put otherwise
            return partial(self.put, key)
        return partial(self.data.__setitem__, key)

    def items(self) -> Iterator[tuple[Key, Any]]:
        """Entries in key order (as a RocksDB scan would give them)."""
        return iter(sorted(self.entries(), key=lambda kv: encode_key(kv[0])))

    def values(self) -> Iterator[Any]:
        """Values in key order (``items`` without the keys)."""
        return (v for _, v in self.items())

    def child(self, name: Any) -> MemoryNamespace:
        ns = self.children.get(name)
        if ns is None:
            if self.children is _NO_CHILDREN:
                self.children = {}
            ns = self.children[name] = MemoryNamespace((*self.name, name))
        return ns

    def clear(self) -> None:
        """Drop this namespace's entries and every child's."""
        self.data.clear()
        self.owner = None
        for ns in self.children.values():
            ns.clear()
        self.children = _NO_CHILDREN  # type: ignore[assignment]

    def key_count(self) -> int:
        return len(self.entries()) + sum(ns.key_count() for ns in self.children.values())

    def dump(self) -> dict[bytes, bytes]:
        """Every entry below this namespace as encoded bytes (a checkpoint)."""
        out: dict[bytes, bytes] = {}
        prefix = encode_key(self.name) if self.name else b""
        for k, v in self.entries():
            out[prefix + b"\x00K" + encode_key(k)] = encode_value(v)
        for ns in self.children.values():
            out.update(ns.dump())
        return out


class MemoryStore:
    """In-memory store for embedded mode; ``checkpoint``/``restore`` go through the codec."""

    def __init__(self) -> None:
        self.root = MemoryNamespace()

    def namespace(self, *path: Any) -> MemoryNamespace:
        ns = self.root
        for p in path:
            ns = ns.child(p)
        return ns

    def key_count(self) -> int:
        return self.root.key_count()

    def checkpoint(self) -> bytes:
        """Serialize every namespace (proves the state is plain data)."""
        return encode_value(self._tree(self.root))

    def _tree(self, ns: MemoryNamespace) -> dict:
        return {
            "d": [[encode_key(k).hex(), v] for k, v in ns.entries()],
            "c": [[encode_key(n).hex(), self._tree(c)] for n, c in ns.children.items()],
        }

    @classmethod
    def restore(cls, blob: bytes) -> MemoryStore:
        store = cls()

        def fill(ns: MemoryNamespace, tree: dict) -> None:
            for k, v in tree["d"]:
                ns.data[decode_key(bytes.fromhex(k))] = v
            for n, sub in tree["c"]:
                fill(ns.child(decode_key(bytes.fromhex(n))), sub)

        fill(store.root, decode_value(blob))
        return store


_LOOK = object()
"""``RocksNamespace``'s ``put_value`` not given: looked up on the database."""


def _put_value_of(db: Any, sink: ChangelogSink | None) -> Any:
    """The database's ``put_value`` (it encodes values itself), unless a sink needs the
    encoded bytes; None otherwise."""
    return getattr(db, "put_value", None) if sink is None else None


class RocksNamespace:
    """A key prefix inside a RocksDB database; writes go through the codec."""

    __slots__ = ("db", "prefix", "sink", "_put_value", "_own", "_unread")

    def __init__(self, db: Any, prefix: bytes, sink: ChangelogSink | None,
                 put_value: Any = _LOOK) -> None:
        self.db = db
        self.prefix = prefix
        self.sink = sink
        # a database that encodes values itself, later (a batch overlay), takes objects;
        # ``put_value``: its bound method, which namespaces of one store share (a key's
        # namespaces would otherwise each hold one)
        self._put_value = (put_value if put_value is not _LOOK
                           else _put_value_of(db, sink))
        self._own = prefix + b"\x00K"
        """The prefix of this namespace's own keys."""
        self._unread: list[Any] | None = None
        """See ``unread``: [nothing written yet, the namespaces marked]."""

    def _key(self, key: Key) -> bytes:
        """The database key of ``key``: ``encode_key`` inlined for an int (a window's
        sequence numbers) and a string (a group key), the keys written per event."""
        t = type(key)
        if t is int:
            return self._own + b"\x02" + (key + _INT_OFFSET).to_bytes(8, "big")
        if t is str:
            return (self._own + b"\x03" + key.encode().replace(b"\x00", b"\x00\xff")
                    + b"\x00\x00")
        return self._own + encode_key(key)

    def get(self, key: Key, default: Any = None) -> Any:
        raw = self.db.get(self._key(key))
        return default if raw is None else decode_value(raw)

    def put(self, key: Key, value: Any) -> None:
        t = type(key)
        if t is int:
            k = self._own + b"\x02" + (key + _INT_OFFSET).to_bytes(8, "big")
        elif t is str:
            k = (self._own + b"\x03" + key.encode().replace(b"\x00", b"\x00\xff")
                 + b"\x00\x00")
        else:
            k = self._own + encode_key(key)
        if self._put_value is not None:
            self._put_value(k, value)
            return
        v = encode_value(value)
        self.db[k] = v
        if self.sink is not None:
            self.sink(k, v)

    def put_new(self, key: Key, value: Any) -> None:
        """``put`` of a key the database does not hold (a window's next sequence number):
        a batch overlay (a database that takes objects: ``put_value``) then drops a delete
        of it in the same batch without a lookup."""
        if self._put_value is None:
            self.put(key, value)
        elif type(key) is int:
            self.db.put_new(self._own + b"\x02" + (key + _INT_OFFSET).to_bytes(8, "big"),
                            value)
        else:
            self.db.put_new(self._key(key), value)

    def putter(self, key: Key) -> Callable[[Any], None]:
        """``put(key, value)`` as a function of the value (a key written per event): the
        key encoded once."""
        if type(self) is not RocksNamespace:  # a subclass may put otherwise
            return partial(self.put, key)
        return self._fast_putter(key)

    def _fast_putter(self, key: Key) -> Callable[[Any], None]:
        k = self._key(key)
        if self._put_value is not None:
            return partial(self._put_value, k)

        def put(value: Any) -> None:
            v = encode_value(value)
            self.db[k] = v
            if self.sink is not None:
                self.sink(k, v)
        return put

    def delete(self, key: Key) -> None:
        if type(key) is int:  # a window's sequence number: ``_key`` inlined
            k = self._own + b"\x02" + (key + _INT_OFFSET).to_bytes(8, "big")
        else:
            k = self._key(key)
        self.db.delete(k)
        if self.sink is not None:
            self.sink(k, None)

    def _scan(self, prefix: bytes) -> Iterable[tuple[bytes, bytes]]:
        scan = getattr(self.db, "scan", None)
        if scan is not None:  # a batch overlay lists a whole prefix at once
            return scan(prefix)
        return self._walk(prefix)

    def _walk(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self.db.iter()
        it.seek(prefix)
        while it.valid():
            k = it.key()
            if not k.startswith(prefix):
                break
            yield k, it.value()
            it.next()

    def items(self) -> Iterator[tuple[Key, Any]]:
        """(key, value) in key order, read at once (a result set loads 10^6 groups): the
        values as ``values`` decodes them, a key of one text without a zero byte (a group
        key) sliced out of its bytes."""
        entries = list(self._scan(self.prefix + b"\x00K"))
        n = len(self.prefix) + 2
        keys = [k[n + 1:-2].decode() if k[n] == 3 and k.find(b"\x00", n) == len(k) - 2
                else decode_key(k[n:]) for k, _ in entries]
        return zip(keys, _decode_values([v for _, v in entries]))

    def values(self) -> Iterator[Any]:
        """Values in key order, the keys not decoded (a large namespace loads faster)."""
        return iter(_decode_values([v for _, v in self._scan(self.prefix + b"\x00K")]))

    def child(self, name: Any) -> RocksNamespace:
        return RocksNamespace(self.db, self.prefix + encode_key(name), self.sink,
                              self._put_value)

    def unread(self) -> Callable[[], None]:
        """Mark this namespace as a context partition's that has never held state (its
        key first came since the store was loaded) while its pipeline is built: the
        operators' reads of their state then find nothing without asking the database
        (each a scan of the batch overlay and a seek), until anything under it is
        written.  Returns the function that ends this (the namespaces stay as they are
        otherwise)."""
        marked: list[Any] = [True, self]
        self.__class__ = _UnreadNamespace
        self._unread = marked

        def settle() -> None:
            for ns in marked[1:]:
                ns.__class__ = RocksNamespace
                ns._unread = None
            marked.clear()
        return settle

    def clear(self) -> None:
        for k, _ in list(self._scan(self.prefix)):
            self.db.delete(k)
            if self.sink is not None:
                self.sink(k, None)

    def drop_records(self, records: Mapping[Key, Any]) -> None:
        """Delete the entries of ``records``' keys: what a result set knows it stored."""
        delete = self.delete
        for k in records:
            delete(k)

    def key_count(self) -> int:
        return sum(1 for _ in self._scan(self.prefix))


class _UnreadNamespace(RocksNamespace):
    """A ``RocksNamespace`` under ``RocksNamespace.unread`` (the same object, its class
    switched back by the function ``unread`` returns)."""

    __slots__ = ()

    def get(self, key: Key, default: Any = None) -> Any:
        if self._unread[0]:  # type: ignore[index]
            return default
        return RocksNamespace.get(self, key, default)

    def items(self) -> Iterator[tuple[Key, Any]]:
        if self._unread[0]:  # type: ignore[index]
            return iter(())
        return RocksNamespace.items(self)

    def values(self) -> Iterator[Any]:
        if self._unread[0]:  # type: ignore[index]
            return iter(())
        return RocksNamespace.values(self)

    def put(self, key: Key, value: Any) -> None:
        self._unread[0] = False  # type: ignore[index]
        RocksNamespace.put(self, key, value)

    def put_new(self, key: Key, value: Any) -> None:
        self._unread[0] = False  # type: ignore[index]
        RocksNamespace.put_new(self, key, value)

    def putter(self, key: Key) -> Callable[[Any], None]:
        self._unread[0] = False  # type: ignore[index]
        return self._fast_putter(key)

    def delete(self, key: Key) -> None:
        self._unread[0] = False  # type: ignore[index]
        RocksNamespace.delete(self, key)

    def clear(self) -> None:
        self._unread[0] = False  # type: ignore[index]
        RocksNamespace.clear(self)

    def child(self, name: Any) -> RocksNamespace:
        ns = RocksNamespace(self.db, self.prefix + encode_key(name), self.sink,
                            self._put_value)
        marked = self._unread
        if marked:  # still building
            ns.__class__ = _UnreadNamespace
            ns._unread = marked
            marked.append(ns)
        return ns


class RocksStore:
    """RocksDB-backed store (rocksdict); ``sink`` receives every write for a changelog."""

    def __init__(self, path: Path | str, sink: ChangelogSink | None = None) -> None:
        from rocksdict import Options, Rdict

        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self.path = Path(path)
        self.db = Rdict(str(path), options=opts)
        self.sink = sink

    def namespace(self, *path: Any) -> RocksNamespace:
        db, sink = self.db, self.sink
        cached = self.__dict__.get("_put_value_cache")
        if cached is None or cached[0] is not db or cached[1] is not sink:
            cached = self._put_value_cache = (db, sink, _put_value_of(db, sink))
        return RocksNamespace(db, encode_key(tuple(path)) if path else b"", sink, cached[2])

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Replay one changelog record (recovery)."""
        if value is None:
            self.db.delete(key)
        else:
            self.db[key] = value

    def key_count(self) -> int:
        return sum(1 for _ in self.db.keys())

    def close(self) -> None:
        self.db.close()
