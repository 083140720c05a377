# kepl: the two commands a new user needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
KEPL   := $(VENV)/bin/kepl

.PHONY: demo test install bytecode lint bench bench-kafka bench-keys bench-formats bench-barrier bench-txn bench-startup nexmark nexmark-kafka soak chaos chaos-cluster spark-cluster test-cluster scenarios oracle oracle-generated broker-start broker-stop clean chart-test image compile compile-clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev,spark,bench]'
	touch $@

install: $(VENV)/.installed

# kepl's own modules as bytecode, brought up to date (only changed files are compiled
# again): where PYTHONDONTWRITEBYTECODE is set, every process would otherwise compile
# them from source as it starts (importing the worker: 0.53 s -> 0.19 s here)
bytecode: install
	@$(PY) -m compileall -q -j 0 app operators schemas tests > /dev/null

demo: bytecode
	$(KEPL) demo

test: bytecode
	$(PY) -m pytest -q -p no:cacheprovider

scenarios: install
	$(KEPL) scenario run ../shared/conformance/cases

# Esper 9 differential oracle (tests/oracle): every Esper-syntax scenario through Esper and kepl.
oracle: install
	$(PY) -m tests.oracle.oracle ../shared/conformance/cases tests/scenarios

# Generated scenarios (single-stream, join, subquery, pattern and match_recognize statements
# x window x aggregation x output x context, tests/oracle/generate.py): expectations recorded
# from Esper, kepl compared with them; prints the disagreements and the counts.  GEN_SEED /
# GEN_COUNT / GEN_KINDS (e.g. single, or join=2,match) pick another batch.
GEN_SEED  ?= 1
GEN_COUNT ?= 300
GEN_KINDS ?= single,join,subquery,pattern,match,context,context_join,output,named,variables,derived,insert
oracle-generated: install
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	$(PY) -m tests.oracle.generate --seed $(GEN_SEED) --count $(GEN_COUNT) --kinds $(GEN_KINDS) --out "$$dir" && \
	$(PY) -m tests.oracle.oracle --record --brief "$$dir"

lint: install
	$(VENV)/bin/ruff check app operators schemas tests

bench: install
	PYTHONPATH=$(CURDIR) $(PY) tests/bench/bench_embedded.py

KEYS ?= 1000000
bench-keys: install
	$(PY) -m tests.bench.bench_keys --keys $(KEYS)

bench-kafka: install
	$(PY) tests/bench/bench_kafka.py --fresh-broker

# Decode and encode cost per event, JSON against Avro, JSON Schema and Protobuf (starts the
# local schema registry).
bench-formats: install
	$(PY) tests/bench/bench_formats.py

# Nexmark queries in EPL over a seeded Person/Auction/Bid stream: kepl embedded (one core)
# beside Esper 9 in-process, after checking a small run's rows against the oracle.
NEXMARK_EVENTS ?= 100000
nexmark: install
	$(PY) -m tests.bench.nexmark.bench --events $(NEXMARK_EVENTS)

# Nexmark on Kafka: the same queries drained by 1 and 2 exactly-once workers (events/s,
# ratio to raw consume, 2-vs-1 scaling), after checking a small run's committed rows
# against the embedded run.  NEXMARK_KAFKA_ARGS=--quick for a short check.
NEXMARK_KAFKA_EVENTS ?= 100000
NEXMARK_KAFKA_ARGS ?=
nexmark-kafka: install
	$(PY) -m tests.bench.nexmark.kafka --fresh-broker --events $(NEXMARK_KAFKA_EVENTS) $(NEXMARK_KAFKA_ARGS)

# A watermark's round trip (publish -> progress visible -> rows read) per statement kind.
bench-barrier: install
	$(PY) tests/bench/bench_barrier.py

# Back-to-back transactions as checkpoints run them, librdkafka's default retry backoff
# against the worker's (ms per transaction; a retried CONCURRENT_TRANSACTIONS shows as 100+).
bench-txn: install
	$(PY) -m tests.bench.bench_txn_backoff

bench-startup: install
	$(PY) tests/bench/bench_cli_startup.py

# A long run: 2 workers at half the drain rate for MINUTES, event-time watermarks,
# snapshots on; RSS per worker, lag and p99 over time (docs/img/soak.png); fails when RSS
# after warm-up grows 10 % or more, or lag passes 10 s of input.
MINUTES ?= 30
soak: install
	$(PY) tests/bench/soak.py --fresh-broker --minutes $(MINUTES)

chaos: install
	$(KEPL) kafka start
	$(PY) -m tests.app.runtime.kafka.chaos --kills 50 --events 20000

# A local 3-node KRaft cluster (replication factor 3, min.insync.replicas 2): brokers
# killed with kill -9 under a streaming app, a rolling restart, an outage longer than the
# transaction timeout, workers scaled 1 -> 3 -> 1; raw output = embedded run.
CLUSTER_PORT ?= 9192
chaos-cluster: install
	$(KEPL) kafka start --nodes 3 --port $(CLUSTER_PORT)
	$(PY) -m tests.app.runtime.kafka.cluster_chaos --port $(CLUSTER_PORT) --kills 12 --events 12000; \
	rc=$$?; $(KEPL) kafka stop --nodes 3 --port $(CLUSTER_PORT); exit $$rc

# The short cluster test (one kill -9 of an input partition's leader), its own cluster.
test-cluster: install
	$(PY) -m pytest -q -p no:cacheprovider -m cluster tests/app/runtime/kafka/test_cluster.py

# Spark on a standalone cluster (a master and a worker from PySpark): the exactly-once
# Parquet export with --master spark://..., as a batch (--once) across a job restart and as
# a continuous job across a kill -9 of its driver (about 13 minutes on a loaded machine).
spark-cluster: install
	$(PY) -m pytest -q -m long tests/app/analytics/test_cluster.py

# The Helm chart: lint, render and schema checks with a pinned helm (built once with Go),
# and the Dockerfile's structure.
chart-test: install
	$(PY) -m pytest -q -p no:cacheprovider tests/helm

# The worker image (needs Docker): make image IMAGE=registry.example.com/kepl:0.1.0
IMAGE ?= kepl:0.1.0
image:
	docker build -f deploy/docker/Dockerfile -t $(IMAGE) .

broker-start: install
	$(KEPL) kafka start

broker-stop: install
	$(KEPL) kafka stop

clean: compile-clean
	rm -rf $(VENV) build *.egg-info

# Optional: the hot modules compiled with Cython into extensions beside their .py files
# (build_compiled.py; KEPL_PURE=1 runs the sources). Measured against the pure modules it
# did not pay on Python 3.11 (worker CPU per event unchanged within the noise), so `install`
# does not run it.
compile: install
	$(VENV)/bin/pip install -q 'cython==3.0.11'
	$(PY) build_compiled.py

compile-clean:
	python3 build_compiled.py --clean
