"""TLS for the local broker: a CA and a broker certificate made with ``openssl``, the
broker properties of an ``SSL`` (or ``SASL_SSL``) listener, and the client settings.

Everything lives in ``<data dir>/tls`` and is made once: a restart keeps the CA, so a
client's ``ssl.ca.location`` stays valid.  The broker's key and certificate chain are
handed to the JVM as a PKCS#12 key store (what Java reads without extra tools); clients
only need the CA certificate in PEM (librdkafka ``ssl.ca.location``; the Java client of
the Spark jobs reads it as a ``PEM`` trust store).
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "3650"
SUBJECT_CA = "/CN=kepl local CA"
SUBJECT_BROKER = "/CN=localhost"
SAN = "subjectAltName=DNS:localhost,IP:127.0.0.1"
PLAIN = "PLAIN"
MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512")
_SCRAM_SAFE = re.compile(r"[A-Za-z0-9._@-]+")


class TlsError(RuntimeError):
    """The certificates could not be made (no openssl, or it failed)."""


@dataclass(frozen=True)
class TlsFiles:
    """The CA certificate clients trust and the broker's key store."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.p12"

    @property
    def password_file(self) -> Path:
        return self.directory / "keystore.password"

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise TlsError("openssl is not on PATH; it makes the local broker's certificates")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TlsError(f"openssl {args[0]} failed (exit {proc.returncode}): "
                       f"{proc.stderr.strip().splitlines()[-1:] or ''}")


def ensure_certificates(data_dir: Path) -> TlsFiles:
    """The CA and broker certificate under ``data_dir/tls``, made unless present."""
    files = TlsFiles(Path(data_dir) / "tls")
    if files.keystore.is_file() and files.ca.is_file() and files.password_file.is_file():
        return files
    d = files.directory
    d.mkdir(parents=True, exist_ok=True)
    password = secrets.token_hex(16)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", DAYS, "-subj", SUBJECT_CA, cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key",
             "-out", "broker.csr", "-subj", SUBJECT_BROKER, cwd=d)
    (d / "san.ext").write_text(SAN + "\n")
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "broker.pem", "-days", DAYS, "-extfile", "san.ext",
             cwd=d)
    _openssl("pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key",
             "-certfile", "ca.pem", "-name", "broker", "-out", "broker.p12.new",
             "-passout", f"pass:{password}", cwd=d)
    files.password_file.write_text(password + "\n")
    files.password_file.chmod(0o600)
    (d / "broker.p12.new").replace(files.keystore)  # last: its presence means complete
    return files


def make_ca(directory: Path) -> Path:
    """A CA certificate of its own (not the broker's): what a client with the wrong CA
    has.  Returns its PEM file."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-ca.key",
             "-out", "other-ca.pem", "-days", DAYS, "-subj", "/CN=some other CA",
             cwd=directory)
    return directory / "other-ca.pem"


def listener_name(sasl: bool) -> str:
    """The listener's name and security protocol: ``SSL``, or ``SASL_SSL`` with SASL."""
    return "SASL_SSL" if sasl else "SSL"


def broker_properties(files: TlsFiles, sasl_users: dict[str, str] | None,
                      mechanism: str = PLAIN) -> dict[str, str]:
    """The key store of the TLS listener (``listener.name.<name>.ssl.*``) and, with
    ``sasl_users``, its login module: PLAIN with the accounts in the JAAS config, or
    SCRAM, whose credentials live in the cluster metadata (``scram_arguments``)."""
    name = listener_name(bool(sasl_users)).lower()
    props = {
        f"listener.name.{name}.ssl.keystore.type": "PKCS12",
        f"listener.name.{name}.ssl.keystore.location": str(files.keystore),
        f"listener.name.{name}.ssl.keystore.password": files.password,
        f"listener.name.{name}.ssl.key.password": files.password,
    }
    if sasl_users and mechanism == PLAIN:
        accounts = " ".join(f'user_{u}="{pw}"' for u, pw in sasl_users.items())
        props[f"listener.name.{name}.plain.sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {accounts};")
    elif sasl_users:
        props[f"listener.name.{name}.{mechanism.lower()}.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    return props


def check_mechanism(mechanism: str) -> str:
    """``mechanism`` upper-cased if the local broker offers it, else ``ValueError``."""
    upper = mechanism.upper()
    if upper not in MECHANISMS:
        raise ValueError(f"SASL mechanism {mechanism!r} is not one of {', '.join(MECHANISMS)}")
    return upper


def scram_arguments(sasl_users: dict[str, str], mechanism: str) -> list[str]:
    """``kafka-storage format`` arguments that create the SCRAM credentials with the
    cluster metadata (``--add-scram MECH=[name=U,password=P]`` per user)."""
    for user, password in sasl_users.items():
        for what, text in (("user name", user), ("password", password)):
            if not _SCRAM_SAFE.fullmatch(text):
                shown = repr(text) if what == "user name" else "****"
                raise ValueError(f"SCRAM {what} {shown}: use letters, digits and . _ - @ only")
    return [arg for user, password in sasl_users.items()
            for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]


def client_settings(files: TlsFiles, sasl: bool = False, mechanism: str = PLAIN,
                    user: str | None = None, password_file: Path | None = None
                    ) -> dict[str, str]:
    """What a client of the TLS listener sets; with ``user``, its credentials (the
    password as a ``file:`` reference, never the text)."""
    out = {"security.protocol": listener_name(sasl), "ssl.ca.location": str(files.ca)}
    if sasl:
        out["sasl.mechanisms"] = mechanism
        if user is not None:
            out["sasl.username"] = user
        if password_file is not None:
            out["sasl.password"] = f"file:{password_file}"
    return out


def write_client_properties(files: TlsFiles, sasl: bool = False, mechanism: str = PLAIN,
                            user: str | None = None, password_file: Path | None = None
                            ) -> Path:
    """``client.properties`` next to the certificates, for ``--kafka-config``."""
    path = files.directory / ("client-sasl.properties" if sasl else "client.properties")
    settings = client_settings(files, sasl, mechanism, user, password_file)
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def sasl_password(files: TlsFiles, user: str, given: str | None = None) -> tuple[str, Path]:
    """The password of ``user`` and the file that keeps it (mode 600, next to the CA):
    ``given`` if set, else the one kept from an earlier start, else a new random one."""
    path = files.directory / f"sasl-{user}.password"
    if given:
        path.write_text(given + "\n")
    elif not path.is_file():
        path.write_text(secrets.token_hex(16) + "\n")
    path.chmod(0o600)
    return path.read_text().strip(), path
