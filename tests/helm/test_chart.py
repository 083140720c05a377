"""The Helm chart (helm/kepl) rendered by a real, pinned helm: lint, Kubernetes schemas,
and what the workers rely on (labels, probes, statement checksum, hook order, security,
Kafka client settings, scaling bounds)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.runtime.kafka.config import AppConfig
from tests.helm.helm_bin import HELM_VERSION, HelmUnavailable, ensure_helm

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "kepl"
PRODUCTION = CHART / "values-production.yaml"
RELEASE = "bank"
NAMESPACE = "cep"
KUBE_VERSION = "1.30.0"
"""Oldest Kubernetes the chart targets (persistentVolumeClaimRetentionPolicy, policy/v1)."""

Doc = dict[str, Any]


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned helm binary (built with Go once per machine)."""
    try:
        return ensure_helm()
    except HelmUnavailable as e:
        pytest.skip(str(e))


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


def render(helm: Path, *args: str) -> list[Doc]:
    """``helm template`` of the chart with extra arguments, as parsed manifests."""
    proc = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                    "--kube-version", KUBE_VERSION, *args)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def render_error(helm: Path, *args: str) -> str:
    """The first line of the error of a ``helm template`` that must fail."""
    proc = run_helm(helm, "template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, *args)
    assert proc.returncode == 1, proc.stdout
    return proc.stderr.splitlines()[0]


def statements_arg(tmp_path: Path, text: str) -> list[str]:
    """``--set-file statements=FILE`` for ``text`` (``--set`` would split it at commas)."""
    path = tmp_path / f"statements-{hashlib.sha1(text.encode()).hexdigest()[:8]}.yaml"
    path.write_text(text)
    return ["--set-file", f"statements={path}"]


def one(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def kinds(docs: list[Doc]) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


def pod_spec(doc: Doc) -> Doc:
    return doc["spec"]["template"]["spec"]


def env_of(container: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.fixture(scope="module")
def default_docs(helm: Path) -> list[Doc]:
    return render(helm)


@pytest.fixture(scope="module")
def production_docs(helm: Path) -> list[Doc]:
    return render(helm, "-f", str(PRODUCTION))


@pytest.fixture(scope="module")
def full_docs(helm: Path) -> list[Doc]:
    """Production values with every optional resource on (KEDA, ServiceMonitor, Grafana
    dashboard, PrometheusRule, config file)."""
    return render(helm, "-f", str(PRODUCTION), "--set", "keda.enabled=true",
                  "--set", "workers.metrics.serviceMonitor.enabled=true",
                  "--set", "workers.metrics.grafanaDashboard.enabled=true",
                  "--set", "workers.metrics.prometheusRule.enabled=true",
                  "--set", "kafka.configSecret.name=kepl-client")


def test_helm_is_the_pinned_version(helm: Path) -> None:
    proc = run_helm(helm, "version", "--template", "{{.Version}}")
    assert proc.stdout == HELM_VERSION


@pytest.mark.parametrize("values", [[], ["-f", str(PRODUCTION)]], ids=["default", "production"])
def test_lint_strict(helm: Path, values: list[str]) -> None:
    proc = run_helm(helm, "lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART), *values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "1 chart(s) linted, 0 chart(s) failed"


def test_kubernetes_before_1_27_is_refused(helm: Path) -> None:
    proc = run_helm(helm, "template", RELEASE, str(CHART), "--kube-version", "1.26.0")
    assert proc.stderr.splitlines()[0] == (
        "Error: chart requires kubeVersion: >=1.27.0-0 which is incompatible with "
        "Kubernetes v1.26.0")


def test_resources_of_default_and_production(default_docs: list[Doc],
                                             production_docs: list[Doc],
                                             full_docs: list[Doc]) -> None:
    base = [("ConfigMap", "bank-kepl-statements"), ("ConfigMap", "bank-kepl-topics-statements"),
            ("Deployment", "bank-kepl-clock"), ("Job", "bank-kepl-topics"),
            ("PodDisruptionBudget", "bank-kepl-worker"), ("Service", "bank-kepl-workers"),
            ("ServiceAccount", "bank-kepl"), ("StatefulSet", "bank-kepl-worker")]
    assert kinds(default_docs) == base
    assert kinds(production_docs) == base
    assert kinds(full_docs) == sorted(base + [("ConfigMap", "bank-kepl-dashboard"),
                                              ("PrometheusRule", "bank-kepl-worker"),
                                              ("ScaledObject", "bank-kepl-worker"),
                                              ("ServiceMonitor", "bank-kepl-worker")])


@pytest.mark.parametrize("which", ["default_docs", "production_docs", "full_docs"])
def test_manifests_match_the_kubernetes_openapi_schemas(which: str,
                                                        request: pytest.FixtureRequest) -> None:
    """Every built-in resource validates strictly (no unknown fields) against the
    Kubernetes OpenAPI schemas bundled with kubernetes-validate (offline)."""
    import kubernetes_validate

    docs: list[Doc] = request.getfixturevalue(which)
    crds = {"keda.sh/v1alpha1", "monitoring.coreos.com/v1"}
    for doc in docs:
        if doc["apiVersion"] in crds:
            continue
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = "/".join(str(p) for p in e.path)
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {path}: {e.message}")


def test_every_resource_carries_the_recommended_labels(production_docs: list[Doc]) -> None:
    common = {"helm.sh/chart": "kepl-0.1.0", "app.kubernetes.io/name": "kepl",
              "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/version": "0.1.0",
              "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "kepl"}
    component = {"bank-kepl-worker": "worker", "bank-kepl-workers": "worker",
                 "bank-kepl-clock": "clock", "bank-kepl-topics": "topics",
                 "bank-kepl-topics-statements": "topics"}
    for doc in production_docs:
        name = doc["metadata"]["name"]
        expected = dict(common)
        if name in component:
            expected["app.kubernetes.io/component"] = component[name]
        assert doc["metadata"]["labels"] == expected, name


def test_selectors_match_pod_labels(production_docs: list[Doc]) -> None:
    worker = {"app.kubernetes.io/name": "kepl", "app.kubernetes.io/instance": RELEASE,
              "app.kubernetes.io/component": "worker"}
    sts = one(production_docs, "StatefulSet", "bank-kepl-worker")
    assert sts["spec"]["selector"]["matchLabels"] == worker
    assert worker.items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    assert one(production_docs, "Service", "bank-kepl-workers")["spec"]["selector"] == worker
    pdb = one(production_docs, "PodDisruptionBudget", "bank-kepl-worker")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": worker}}
    clock = one(production_docs, "Deployment", "bank-kepl-clock")
    assert clock["spec"]["selector"]["matchLabels"] == {**worker,
                                                        "app.kubernetes.io/component": "clock"}
    spread = pod_spec(sts)["topologySpreadConstraints"]
    assert [c["labelSelector"] for c in spread] == [{"matchLabels": worker}] * 2
    assert [c["topologyKey"] for c in spread] == ["topology.kubernetes.io/zone",
                                                  "kubernetes.io/hostname"]


def test_worker_probes_hit_the_health_endpoints(default_docs: list[Doc],
                                                production_docs: list[Doc]) -> None:
    c = pod_spec(one(default_docs, "StatefulSet", "bank-kepl-worker"))["containers"][0]
    assert c["ports"] == [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}]
    assert c["args"] == ["worker", "/etc/kepl/statements.yaml", "--bootstrap", "kafka:9092",
                         "--data-dir", "/var/lib/kepl", "--metrics-port", "9100",
                         "--log-level", "warning"]
    assert c["startupProbe"] == {"httpGet": {"path": "/healthz", "port": "metrics"},
                                 "periodSeconds": 10, "failureThreshold": 60}
    assert c["livenessProbe"] == {"httpGet": {"path": "/healthz", "port": "metrics"},
                                  "periodSeconds": 10, "timeoutSeconds": 5,
                                  "failureThreshold": 6}
    assert c["readinessProbe"] == {"httpGet": {"path": "/readyz", "port": "metrics"},
                                   "periodSeconds": 5, "timeoutSeconds": 5,
                                   "failureThreshold": 2}
    prod = pod_spec(one(production_docs, "StatefulSet", "bank-kepl-worker"))["containers"][0]
    assert (prod["startupProbe"]["failureThreshold"],
            prod["livenessProbe"]["failureThreshold"]) == (90, 12)


def test_pods_roll_when_the_statements_change(helm: Path, default_docs: list[Doc],
                                             tmp_path: Path) -> None:
    """checksum/statements is the SHA-256 of the mounted statement file, on the workers
    and the clock; it moves with the statements and with nothing else."""
    text = one(default_docs, "ConfigMap", "bank-kepl-statements")["data"]["statements.yaml"]
    digest = hashlib.sha256(text.encode()).hexdigest()

    def checksums(docs: list[Doc]) -> list[str]:
        return [one(docs, kind, name)["spec"]["template"]["metadata"]["annotations"]
                ["checksum/statements"]
                for kind, name in [("StatefulSet", "bank-kepl-worker"),
                                   ("Deployment", "bank-kepl-clock")]]

    assert checksums(default_docs) == [digest, digest]
    assert checksums(render(helm, "--set", "workers.logLevel=info")) == [digest, digest]
    changed = text.replace("#length(5)", "#length(6)")
    moved = render(helm, *statements_arg(tmp_path, changed))
    assert one(moved, "ConfigMap", "bank-kepl-statements")["data"]["statements.yaml"] == changed
    assert checksums(moved) == [hashlib.sha256(changed.encode()).hexdigest()] * 2


def test_topics_hook_reads_its_own_statements_created_first(production_docs: list[Doc]) -> None:
    """At pre-install the release's ConfigMap does not exist yet and at pre-upgrade it
    holds the old statements: the Job mounts a hook ConfigMap created before it."""
    hook_cm = one(production_docs, "ConfigMap", "bank-kepl-topics-statements")
    job = one(production_docs, "Job", "bank-kepl-topics")
    release_cm = one(production_docs, "ConfigMap", "bank-kepl-statements")
    assert hook_cm["metadata"]["annotations"] == {
        "helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-weight": "-10",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}
    assert job["metadata"]["annotations"] == {
        "helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-weight": "0",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}
    assert int(hook_cm["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert hook_cm["data"] == release_cm["data"]
    spec = pod_spec(job)
    assert spec["volumes"][0] == {"name": "statements",
                                  "configMap": {"name": "bank-kepl-topics-statements"}}
    # nothing else is a hook, and the Job uses no release resource (no ServiceAccount)
    hooks = [d["metadata"]["name"] for d in production_docs
             if "helm.sh/hook" in d["metadata"].get("annotations", {})]
    assert hooks == ["bank-kepl-topics-statements", "bank-kepl-topics"]
    assert "serviceAccountName" not in spec
    assert spec["automountServiceAccountToken"] is False
    assert spec["containers"][0]["args"] == [
        "deploy", "/etc/kepl/statements.yaml", "--bootstrap",
        "kafka-0.kafka:9093,kafka-1.kafka:9093,kafka-2.kafka:9093"]


def test_topics_hook_passes_the_upgrade_options(helm: Path) -> None:
    docs = render(helm, "--set", "topics.deployArgs={--rebuild,recent=from-now}")
    spec = pod_spec(one(docs, "Job", "bank-kepl-topics"))
    assert spec["containers"][0]["args"][-2:] == ["--rebuild", "recent=from-now"]
    assert spec["containers"][0]["args"][:2] == ["deploy", "/etc/kepl/statements.yaml"]


def test_pods_run_non_root_on_a_read_only_root(production_docs: list[Doc]) -> None:
    for kind, name in [("StatefulSet", "bank-kepl-worker"), ("Deployment", "bank-kepl-clock"),
                       ("Job", "bank-kepl-topics")]:
        spec = pod_spec(one(production_docs, kind, name))
        assert spec["securityContext"] == {
            "runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"}}, name
        (c,) = spec["containers"]
        assert c["securityContext"] == {"allowPrivilegeEscalation": False,
                                        "readOnlyRootFilesystem": True,
                                        "capabilities": {"drop": ["ALL"]}}, name
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes[mounts["/tmp"]] == {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}
    sts = one(production_docs, "StatefulSet", "bank-kepl-worker")
    mounts = {m["mountPath"]: m["name"]
              for m in pod_spec(sts)["containers"][0]["volumeMounts"]}
    assert mounts["/var/lib/kepl"] == "state"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "20Gi"}}}
    assert pod_spec(sts)["serviceAccountName"] == "bank-kepl"
    assert one(production_docs, "ServiceAccount", "bank-kepl")[
        "automountServiceAccountToken"] is False


def test_instance_id_is_the_pod_name(default_docs: list[Doc]) -> None:
    sts = one(default_docs, "StatefulSet", "bank-kepl-worker")
    env = env_of(pod_spec(sts)["containers"][0])
    assert env["KEPL_INSTANCE_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["replicas"] == 1


def test_kafka_client_settings_come_from_values_and_secrets(full_docs: list[Doc]) -> None:
    expected = {
        "KAFKA_BOOTSTRAP_SERVERS": "kafka-0.kafka:9093,kafka-1.kafka:9093,kafka-2.kafka:9093",
        "KEPL_KAFKA_SASL_MECHANISMS": "SCRAM-SHA-512",
        "KEPL_KAFKA_SASL_USERNAME": "kepl-bank",
        "KEPL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KEPL_KAFKA_SSL_CA_LOCATION": "/etc/kepl/kafka-ca/ca.crt",
        "KEPL_KAFKA_SASL_PASSWORD": {"secretKeyRef": {"name": "kepl-kafka",
                                                      "key": "sasl-password"}},
        "KEPL_KAFKA_CONFIG": "/etc/kepl/kafka/client.properties",
    }
    for kind, name in [("StatefulSet", "bank-kepl-worker"), ("Deployment", "bank-kepl-clock"),
                       ("Job", "bank-kepl-topics")]:
        spec = pod_spec(one(full_docs, kind, name))
        env = env_of(spec["containers"][0])
        assert {k: env[k] for k in expected} == expected, name
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["kafka-config"]["secret"] == {
            "secretName": "kepl-client",
            "items": [{"key": "client.properties", "path": "client.properties"}]}
        assert volumes["kafka-ca"]["secret"] == {"secretName": "kepl-kafka-ca"}
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert (mounts["kafka-config"], mounts["kafka-ca"]) == ("/etc/kepl/kafka",
                                                                "/etc/kepl/kafka-ca")


def test_production_statement_file_loads_with_replication_3(production_docs: list[Doc],
                                                            tmp_path: Path) -> None:
    """The mounted file is the statements value plus the chart's replication defaults,
    and kepl reads it as such."""
    text = one(production_docs, "ConfigMap", "bank-kepl-statements")["data"]["statements.yaml"]
    assert text.endswith("# chart defaults (kafka.replicationFactor, kafka.minInsyncReplicas)\n"
                         "replication_factor: 3\nmin_insync_replicas: 2\n")
    path = tmp_path / "statements.yaml"
    path.write_text(text)
    config = AppConfig.from_file(path)
    assert (config.app, config.source_partitions, config.replication_factor,
            config.min_insync_replicas) == ("bank", 12, 3, 2)


def test_statement_file_replication_wins_over_the_chart_default(helm: Path,
                                                              tmp_path: Path) -> None:
    statements = "app: a\nreplication_factor: 2\nstatements:\n  - epl: select * from A\n"
    docs = render(helm, "--set", "kafka.replicationFactor=3",
                  "--set", "kafka.minInsyncReplicas=2", *statements_arg(tmp_path, statements))
    text = one(docs, "ConfigMap", "bank-kepl-statements")["data"]["statements.yaml"]
    assert text == statements + ("# chart defaults (kafka.replicationFactor, "
                                 "kafka.minInsyncReplicas)\nmin_insync_replicas: 2\n")


def test_keda_scales_on_the_group_lag_up_to_the_partitions(full_docs: list[Doc]) -> None:
    so = one(full_docs, "ScaledObject", "bank-kepl-worker")
    assert so["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet",
                           "name": "bank-kepl-worker"},
        "minReplicaCount": 3, "maxReplicaCount": 12, "pollingInterval": 30,
        "cooldownPeriod": 300,
        "triggers": [{"type": "kafka", "metadata": {
            "bootstrapServers": "kafka-0.kafka:9093,kafka-1.kafka:9093,kafka-2.kafka:9093",
            "consumerGroup": "kepl.bank", "lagThreshold": "5000",
            "allowIdleConsumers": "false", "offsetResetPolicy": "earliest"},
            "authenticationRef": {"name": "kepl-kafka"}}]}
    # KEDA owns the replica count
    assert "replicas" not in one(full_docs, "StatefulSet", "bank-kepl-worker")["spec"]


def test_worker_count_is_bounded_by_the_partitions(helm: Path, tmp_path: Path) -> None:
    assert render_error(helm, "-f", str(PRODUCTION), "--set", "keda.enabled=true",
                        "--set", "keda.maxReplicaCount=13") == (
        "Error: execution error at (kepl/templates/scaledobject.yaml:4:4): "
        "keda.maxReplicaCount (13) exceeds the partitions the workers share (12): "
        "a worker beyond them gets no partition")
    assert render_error(helm, "--set", "workers.replicas=2") == (
        "Error: execution error at (kepl/templates/workers.yaml:3:4): workers.replicas (2) "
        "exceeds the partitions the workers share (1): a worker beyond them gets no "
        "partition; raise 'partitions' in the statement file or workers.partitions")
    # context_partitions, statement_partitions and workers.partitions raise the bound
    statements = ("app: a\ncontext_partitions: {ByAccount: 8, Other: source}\n"
                  "statements:\n  - epl: select * from A\n")
    docs = render(helm, "--set", "workers.replicas=8", *statements_arg(tmp_path, statements))
    assert one(docs, "StatefulSet", "bank-kepl-worker")["spec"]["replicas"] == 8
    statements = ("app: a\nstatement_partitions: {per_account: 6}\n"
                  "statements:\n  - epl: select * from A\n")
    docs = render(helm, "--set", "workers.replicas=6", *statements_arg(tmp_path, statements))
    assert one(docs, "StatefulSet", "bank-kepl-worker")["spec"]["replicas"] == 6
    docs = render(helm, "--set", "workers.replicas=4", "--set", "workers.partitions=4")
    assert one(docs, "StatefulSet", "bank-kepl-worker")["spec"]["replicas"] == 4


def test_values_schema_rejects_bad_values(helm: Path, tmp_path: Path) -> None:
    assert run_helm(helm, "template", RELEASE, str(CHART), "--set",
                    "workers.replicas=three").stderr.splitlines()[1:3] == [
        "kepl:", "- at '/workers/replicas': got string, want integer"]
    assert run_helm(helm, "template", RELEASE, str(CHART), "--set",
                    "workers.logLevel=loud").stderr.splitlines()[2] == (
        "- at '/workers/logLevel': value must be one of 'debug', 'info', 'warning', "
        "'error', 'critical'")
    assert render_error(helm, *statements_arg(tmp_path, "statements: []\n")) == (
        "Error: execution error at (kepl/templates/workers.yaml:1:19): "
        "statements: the statement file has no 'app'")


def test_service_monitor_scrapes_the_metrics_port(full_docs: list[Doc]) -> None:
    sm = one(full_docs, "ServiceMonitor", "bank-kepl-worker")
    service = one(full_docs, "Service", "bank-kepl-workers")
    assert sm["spec"] == {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "kepl",
                                     "app.kubernetes.io/instance": RELEASE,
                                     "app.kubernetes.io/component": "worker"}},
        "namespaceSelector": {"matchNames": [NAMESPACE]},
        "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}]}
    assert sm["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9100,
                                         "targetPort": "metrics", "protocol": "TCP"}]


DASHBOARD = CHART / "dashboards" / "kepl.json"


def dashboard_queries(dashboard: Doc) -> list[str]:
    """The PromQL of every panel (rows included) of a Grafana dashboard."""
    out: list[str] = []

    def walk(panels: list[Doc]) -> None:
        for panel in panels:
            out.extend(t["expr"] for t in panel.get("targets", []))
            walk(panel.get("panels", []))
    walk(dashboard["panels"])
    return out


def test_dashboard_configmap_is_for_the_grafana_sidecar(full_docs: list[Doc]) -> None:
    cm = one(full_docs, "ConfigMap", "bank-kepl-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert list(cm["data"]) == ["kepl.json"]
    assert json.loads(cm["data"]["kepl.json"]) == json.loads(DASHBOARD.read_text())


def test_dashboard_panels_query_only_metrics_the_worker_exports() -> None:
    """Every metric a panel reads is one the worker declares (``health.METRICS``), and
    the dashboard shows each of the figures docs/operations.md describes."""
    from app.runtime.kafka.health import series_names
    from tests.helm.promql import metric_names

    dashboard = json.loads(DASHBOARD.read_text())
    queries = dashboard_queries(dashboard)
    assert len(queries) >= 20
    read: set[str] = set()
    for q in queries:
        names = metric_names(q)
        assert names, q
        assert names <= series_names(), f"{q}: {sorted(names - series_names())}"
        read |= names
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            assert set(re.findall(r"kepl_\w+", var["definition"])) <= series_names()
    shown = {n.removesuffix("_total").removesuffix("_bucket").removesuffix("_sum")
             .removesuffix("_count") for n in read}
    assert shown == {
        "kepl_events_in", "kepl_rows_out", "kepl_dead_letters", "kepl_checkpoints",
        "kepl_checkpoint_seconds", "kepl_changelog_bytes", "kepl_restore_seconds",
        "kepl_consumer_lag", "kepl_waiting_records", "kepl_stalled", "kepl_input_lost",
        "kepl_processing_seconds", "kepl_statement_processing_seconds", "kepl_state_bytes",
        "kepl_rebalances", "kepl_assigned_partitions", "kepl_previous_exit_code"}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_prometheus_rule_alerts_on_metrics_the_worker_exports(full_docs: list[Doc]) -> None:
    from app.runtime.kafka.health import series_names
    from tests.helm.promql import metric_names

    rule = one(full_docs, "PrometheusRule", "bank-kepl-worker")
    [group] = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert sorted(alerts) == ["KeplConsumerLagGrowing", "KeplDeadLetters", "KeplInputLost",
                              "KeplNoProgress", "KeplStalled", "KeplWorkerFenced"]
    for name, r in alerts.items():
        names = metric_names(r["expr"])
        assert names and names <= series_names(), f"{name}: {r['expr']}"
        assert 'app="bank"' in r["expr"], name
    assert alerts["KeplConsumerLagGrowing"]["for"] == "15m"
    assert "> 1000" in alerts["KeplConsumerLagGrowing"]["expr"]
    assert alerts["KeplDeadLetters"]["expr"].endswith("> 0.1")
    assert alerts["KeplWorkerFenced"]["expr"].endswith("== 3")


def test_prometheus_rule_thresholds_come_from_values(helm: Path) -> None:
    docs = render(helm, "--set", "workers.metrics.prometheusRule.enabled=true",
                  "--set", "workers.metrics.prometheusRule.lagThreshold=50",
                  "--set", "workers.metrics.prometheusRule.lagGrowingFor=3m",
                  "--set", "workers.metrics.prometheusRule.labels.release=prom")
    rule = one(docs, "PrometheusRule", "bank-kepl-worker")
    assert rule["metadata"]["labels"]["release"] == "prom"
    lag = rule["spec"]["groups"][0]["rules"][0]
    assert (lag["alert"], lag["for"]) == ("KeplConsumerLagGrowing", "3m")
    assert "kepl_consumer_lag{app=\"bank\"}) > 50 and" in lag["expr"]
