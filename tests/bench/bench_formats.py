"""Per-event cost of the record formats: decoding a source record into a typed event
and encoding an output row, JSON (the default) against Avro, JSON Schema and Protobuf in
the Confluent wire format (the worker's own decoders and encoders, schemas from a real
registry, fetched once).

Run: .venv/bin/python tests/bench/bench_formats.py [--events N] [--registry URL]
(without --registry it starts the local one, ``kepl registry``, and stops it after).
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.registry import local_registry
from app.runtime.catalog import Catalog, event_coercer
from app.runtime.kafka import codec, formats

SCHEMA = {"account": "string", "amount": "double", "branch": "string", "n": "long"}
ROW = {"account": "string", "total": "double", "n": "long"}


def _events(n: int) -> list[dict[str, Any]]:
    rnd = random.Random(1)
    return [{"account": f"A{rnd.randrange(1000)}", "amount": rnd.random() * 1000,
             "branch": f"branch-{rnd.randrange(50)}", "n": rnd.randrange(1 << 40)}
            for _ in range(n)]


def _per_event_us(fn: Callable[[Any], Any], items: list[Any]) -> float:
    fn(items[0])  # schema fetched / registered once, outside the timing
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for x in items:
            fn(x)
        best = min(best, time.perf_counter() - t0)
    return best / len(items) * 1e6


def measure(url: str, n: int) -> dict[str, tuple[float, float, int]]:
    """Format -> (decode us/event, encode us/row, bytes/event)."""
    evs = _events(n)
    coerce = event_coercer(Catalog.from_schemas({"W": SCHEMA}), "W")
    run = uuid.uuid4().hex[:8]
    fmt = {"registry": url, "schemas": {"W": SCHEMA},
           "formats": {"out": {"format": "avro", "schema": ROW}}}
    avro_schema = formats.output_schema({"schemas": {"W": SCHEMA}, "formats": {
        "W2": {"format": "avro", "schema": SCHEMA}}}, "W2")
    src = formats.avro_encoder(url, f"bench-{run}.in", avro_schema)
    json_in = [codec.dumps(e) for e in evs]
    avro_in = [src(e)[0] for e in evs]
    dec = formats.avro_decoder(url, f"bench-{run}.in")
    enc = formats.avro_encoder(url, f"bench-{run}.out", formats.output_schema(fmt, "out"))
    rows = [{"account": e["account"], "total": e["amount"], "n": e["n"]} for e in evs]
    framed_in = [b"\x00\x00\x00\x00\x01" + v for v in json_in]
    framed = formats.framed_json_encoder(url, f"bench-{run}.out-js",
                                         formats.output_json_schema(fmt, "out"))
    pb_fmt = {"registry": url, "schemas": {"W2": SCHEMA}, "formats": {"W2": {
        "format": "protobuf", "schema": SCHEMA}}}
    pb_src = formats.protobuf_encoder(url, f"bench-{run}.pb-in",
                                      formats.output_proto(pb_fmt, "W2"))
    pb_in = [pb_src(e)[0] for e in evs]
    pb_dec = formats.protobuf_decoder(url)
    pb_enc = formats.protobuf_encoder(url, f"bench-{run}.pb-out",
                                      formats.output_proto(fmt, "out"))
    return {
        "protobuf": (_per_event_us(lambda v: coerce(pb_dec(v)), pb_in),
                     _per_event_us(pb_enc, rows),
                     sum(map(len, pb_in)) // n),
        "json": (_per_event_us(lambda v: coerce(codec.loads(v)), json_in),
                 _per_event_us(codec.encode_row, rows),
                 sum(map(len, json_in)) // n),
        "avro": (_per_event_us(lambda v: coerce(dec(v)), avro_in),
                 _per_event_us(enc, rows),
                 sum(map(len, avro_in)) // n),
        "json-schema": (_per_event_us(lambda v: coerce(formats.framed_json_decoder(v)),
                                      framed_in),
                        _per_event_us(framed, rows),
                        sum(map(len, framed_in)) // n),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--registry", default=None, help="a running registry's URL")
    args = ap.parse_args()
    port = data_dir = None
    url = args.registry
    if url is None:
        with socket.socket() as s:
            s.bind((local_registry.HOST, 0))
            port = s.getsockname()[1]
        data_dir = Path(tempfile.mkdtemp(prefix="kepl-bench-registry-"))
        url = local_registry.start(port, data_dir, die_with_parent=True).url
    try:
        res = measure(url, args.events)
    finally:
        if port is not None:
            local_registry.stop(port, data_dir)
    print(f"{args.events} events of {json.dumps(SCHEMA)}; rows of {json.dumps(ROW)}")
    print(f"{'format':<12}{'decode us/event':>18}{'encode us/row':>16}{'bytes/event':>13}")
    for name in ("json", "avro", "json-schema", "protobuf"):
        d, e, b = res[name]
        print(f"{name:<12}{d:>18.2f}{e:>16.2f}{b:>13}")
    j = res["json"]
    for name in ("avro", "protobuf"):
        a = res[name]
        print(f"{name}/json: decode x{a[0] / j[0]:.2f}, encode x{a[1] / j[1]:.2f}, "
              f"size x{a[2] / j[2]:.2f}")


if __name__ == "__main__":
    main()
