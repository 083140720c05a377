"""Kafka client settings shared by every client kepl creates (worker, CLI, Spark jobs).

Security and other librdkafka properties (``security.protocol``, ``sasl.*``, ``ssl.*``,
``client.id`` …) come from, later ones winning:

1. the statement file's ``kafka:`` section;
2. a properties file (``--kafka-config FILE``, or ``KEPL_KAFKA_CONFIG``): ``key=value``
   lines, ``#`` comments;
3. environment variables ``KEPL_KAFKA_<PROPERTY>``, the property upper-cased with dots
   as underscores (``KEPL_KAFKA_SASL_PASSWORD`` → ``sasl.password``).

A value ``${NAME}`` is read from environment variable NAME and ``file:PATH`` from a
file (its text, stripped), so secrets stay out of statement files.  ``redacted`` is
what may be printed: secret-looking values are masked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_PREFIX = "KEPL_KAFKA_"
CONFIG_FILE_ENV = "KEPL_KAFKA_CONFIG"
_SECRET = re.compile(r"password|secret|key\.pem|\.key$|token|jaas", re.IGNORECASE)
_JAVA_ONLY = ("ssl.truststore.", "sasl.jaas.config")
_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")

_file_settings: dict[str, str] = {}
_app_settings: dict[str, str] = {}


class ClientConfigError(ValueError):
    """A Kafka client setting that cannot be used (one line: what and where)."""


def configure(app_section: Mapping[str, Any] | None = None,
              config_file: str | Path | None = None) -> None:
    """Set this process's client settings: the statement file's ``kafka:`` section and
    a properties file (default: ``KEPL_KAFKA_CONFIG``)."""
    global _app_settings, _file_settings
    _app_settings = {str(k): _text(v) for k, v in (app_section or {}).items()}
    path = config_file or os.environ.get(CONFIG_FILE_ENV, "").strip() or None
    _file_settings = read_properties(Path(path)) if path else {}


def read_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines of a librdkafka/Java-style properties file."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ClientConfigError(f"Kafka client config {path}: {e.strerror or e}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ClientConfigError(f"{path}:{n}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def env_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``KEPL_KAFKA_*`` variables as client properties."""
    env = os.environ if env is None else env
    return {k[len(ENV_PREFIX):].lower().replace("_", "."): v for k, v in env.items()
            if k.startswith(ENV_PREFIX) and k != CONFIG_FILE_ENV and len(k) > len(ENV_PREFIX)}


def settings() -> dict[str, str]:
    """The merged client settings of this process, references resolved."""
    merged = {**_app_settings, **_file_settings, **env_settings()}
    return {k: resolve(k, v) for k, v in merged.items()}


def resolve(key: str, value: str) -> str:
    """``${NAME}`` from the environment, ``file:PATH`` from a file, else the value."""
    m = _REF.match(value)
    if m:
        if m.group(1) not in os.environ:
            raise ClientConfigError(f"Kafka client setting {key}: environment variable "
                                    f"{m.group(1)} is not set")
        return os.environ[m.group(1)]
    if value.startswith("file:"):
        path = Path(value[5:]).expanduser()
        try:
            return path.read_text().strip()
        except OSError as e:
            raise ClientConfigError(f"Kafka client setting {key}: cannot read {path}: "
                                    f"{e.strerror or e}") from None
    return value


def java_only(key: str) -> bool:
    """A setting only the Java client of the Spark jobs knows (a JKS or PEM trust store,
    a JAAS config): librdkafka would refuse it, so its clients leave it out."""
    return key.startswith(_JAVA_ONLY)


def conf(base: Mapping[str, Any]) -> dict[str, Any]:
    """A client's configuration: ``base`` (bootstrap and the client's own tuning) with
    the process's settings laid over it, the Java client's own settings left out."""
    return {**base, **{k: v for k, v in settings().items() if not java_only(k)}}


FETCH_QUEUE_BACKOFF_MS = 10
"""How soon a consumer fetches a partition again after its prefetch queue was full.

librdkafka counts the queue of a group consumer as a whole: once its partitions hold
``queued.min.messages`` (100,000) records between them, every partition's next fetch
waits ``fetch.queue.backoff.ms`` (1 s by default), the repartition partitions that
hold the routed bundles too.  A worker catching up on a backlog then sat idle for most
of a second after routing it, waiting for its own bundles."""


def consumer_conf(base: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` of a consumer: kepl's consumer defaults under ``base``."""
    return conf({"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS, **base})


def spark_options() -> dict[str, str]:
    """The settings as Spark Kafka source options (``kafka.<property>``).

    librdkafka names that the Java client spells differently are mapped (SASL
    credentials become a JAAS config)."""
    s = settings()
    out = {f"kafka.{k}": v for k, v in s.items()
           if k not in ("sasl.username", "sasl.password", "sasl.mechanisms",
                        "ssl.ca.location")}
    if "ssl.ca.location" in s and "ssl.truststore.location" not in s:
        # the Java client reads a CA in PEM as a trust store (unless one is given)
        out.setdefault("kafka.ssl.truststore.type", "PEM")
        out["kafka.ssl.truststore.location"] = s["ssl.ca.location"]
    mech = s.get("sasl.mechanisms") or s.get("sasl.mechanism")
    if mech:
        out["kafka.sasl.mechanism"] = mech
        out.pop("kafka.sasl.mechanisms", None)
    if "sasl.username" in s and "kafka.sasl.jaas.config" not in out:
        module = ("org.apache.kafka.common.security.scram.ScramLoginModule"
                  if (mech or "").upper().startswith("SCRAM")
                  else "org.apache.kafka.common.security.plain.PlainLoginModule")
        out["kafka.sasl.jaas.config"] = (
            f'{module} required username="{s["sasl.username"]}" '
            f'password="{s.get("sasl.password", "")}";')
    return out


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration fit to print: secret-looking values masked."""
    return {k: ("****" if _SECRET.search(k) else v) for k, v in config.items()}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def tls_failure(bootstrap: str, message: str) -> str:
    """One line for a failed TLS handshake (librdkafka's text, its address and retry
    count taken off): most often a CA that did not sign the broker's certificate."""
    why = re.sub(r"^\S+://\S+: | \(after \d+ms in state \w+\)$", "", message)
    why = re.sub(r"\s*\(add '?debug=security'? .*?\)", "", why)
    return (f"the TLS handshake with the broker at {bootstrap} failed: {why} (check "
            "ssl.ca.location: the CA that signed the broker's certificate)")


def _account() -> str:
    """Who tried to log in, for an error line: the user and the SASL mechanism."""
    s = settings()
    mech = s.get("sasl.mechanisms") or s.get("sasl.mechanism") or "GSSAPI"
    return f"user {s.get('sasl.username', '(none)')} (SASL mechanism {mech.upper()})"


class BrokerUnavailable(RuntimeError):
    """No broker answers at the bootstrap address, or it refused the credentials."""


def probe(bootstrap: str, command: str, timeout_s: float = 5.0) -> set[str]:
    """The topics at ``bootstrap``, asked with a short timeout before a command or a
    worker starts its work: a broker that is down, or one that refuses the credentials,
    is one line (``BrokerUnavailable``), not a traceback after minutes."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    admin = AdminClient(conf({"bootstrap.servers": bootstrap, "log_level": 0,
                              "error_cb": errors.append}))
    try:
        return set(admin.list_topics(timeout=timeout_s).topics)
    except KafkaException as e:
        admin.poll(0.2)  # error callbacks are served by poll
        auth = next((x for x in errors if x.code() == KafkaError._AUTHENTICATION), None)
        if auth is not None:
            why = re.sub(r"^\S+://\S+: | \(after \d+ms in state \w+\)$", "", auth.str())
            raise BrokerUnavailable(
                f"{command}: the broker at {bootstrap} refused the credentials of "
                f"{_account()}: {why} (check the kafka: settings, --kafka-config or "
                "KEPL_KAFKA_*)"
            ) from None
        handshake = next((x for x in errors if x.code() == KafkaError._SSL), None)
        if handshake is not None:
            raise BrokerUnavailable(f"{command}: {tls_failure(bootstrap, handshake.str())}"
                                    ) from None
        cause = e.args[0].str().removeprefix("Failed to get metadata: ")
        raise BrokerUnavailable(f"{command}: no Kafka broker answers at {bootstrap}: {cause} "
                                "(is the broker up? kepl kafka start)") from None
