"""A minimal faust-streaming agent, the floor ``bench_kafka.py`` compares kepl with.

It reads JSON events from one topic and keeps a count and a sum per key, in batches
(``stream.take``), and writes ``{"events", "seconds"}`` (first to last event handled) to
the file named by ``BENCH_RESULT`` once ``BENCH_EVENTS`` events were seen.

Run by the bench: python tests/bench/faust_agent.py worker -l warn
(environment: BENCH_BOOTSTRAP, BENCH_TOPIC, BENCH_EVENTS, BENCH_RESULT, BENCH_DIR)
"""

from __future__ import annotations

import json
import os
import time

import faust

TOPIC = os.environ["BENCH_TOPIC"]
N = int(os.environ["BENCH_EVENTS"])

app = faust.App(f"bench-faust-{TOPIC}", broker=f"kafka://{os.environ['BENCH_BOOTSTRAP']}",
                value_serializer="raw", datadir=os.environ["BENCH_DIR"],
                web_enabled=False, topic_disable_leader=True, consumer_auto_offset_reset="earliest")
source = app.topic(TOPIC, value_serializer="raw", key_serializer="raw")
counts: dict[str, list[float]] = {}
seen = {"n": 0, "t0": 0.0}


@app.agent(source)
async def job(stream):  # type: ignore[no-untyped-def]
    async for values in stream.take(1000, within=0.2):
        if not seen["n"]:
            seen["t0"] = time.perf_counter()
        for v in values:
            e = json.loads(v)
            c = counts.setdefault(e["account"], [0, 0.0])
            c[0] += 1
            c[1] += e["amount"]
        seen["n"] += len(values)
        if seen["n"] >= N:
            with open(os.environ["BENCH_RESULT"], "w") as f:
                json.dump({"events": seen["n"],
                           "seconds": time.perf_counter() - seen["t0"]}, f)
            os._exit(0)


if __name__ == "__main__":
    app.main()
