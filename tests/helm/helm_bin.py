"""A pinned ``helm`` binary for the chart tests, built once per machine with Go.

``go install helm.sh/helm/v3/cmd/helm@HELM_VERSION`` (through the Go module proxy)
writes into a scratch directory that is renamed into place at the end, under an
exclusive lock, so concurrent test runs build once and an interrupted build never
leaves a half-written binary: the protocol of the broker's jars in
``app/kafka/local_broker.py``.  Cache: ``${KEPL_HOME:-~/.cache/kepl}/helm/<version>/helm``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from app.kafka.local_broker import file_lock, kepl_home

HELM_VERSION = "v3.21.4"
HELM_KUBE_VERSION = ("1", "36")
"""Default Kubernetes version of that helm (its k8s.io modules, v0.36), set at link time
as helm's own Makefile does; without it ``helm template`` assumes v1.20."""
BUILD_TIMEOUT_S = 1200.0


class HelmUnavailable(RuntimeError):
    """No cached helm and no Go toolchain to build one (the tests skip with this reason)."""


def helm_path(version: str = HELM_VERSION) -> Path:
    """Where the helm binary of ``version`` is cached (may not exist yet)."""
    return kepl_home() / "helm" / version / "helm"


def ensure_helm(version: str = HELM_VERSION) -> Path:
    """The cached helm of ``version``, built with ``go install`` the first time."""
    binary = helm_path(version)
    if binary.is_file():
        return binary
    with file_lock(binary.parent / ".build.lock"):
        if binary.is_file():
            return binary
        go = shutil.which("go")
        if go is None:
            raise HelmUnavailable(
                f"the chart tests need helm {version}: Go is not on PATH to build it "
                f"(go install helm.sh/helm/v3/cmd/helm@{version}) and {binary} is not cached")
        scratch = binary.parent / f"bin.partial-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        env = {**os.environ, "GOBIN": str(scratch), "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
        major, minor = HELM_KUBE_VERSION
        ldflags = " ".join(
            ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={version}"]
            + [f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
               for pkg in ("chartutil", "lint/rules")
               for part, value in (("Major", major), ("Minor", minor))])
        print(f"kepl helm: building helm {version} with {go} into {binary} (one-time)...",
              file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                [go, "install", "-trimpath", "-ldflags", ldflags,
                 f"helm.sh/helm/v3/cmd/helm@{version}"],
                env=env, cwd=scratch, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            shutil.rmtree(scratch, ignore_errors=True)
            raise RuntimeError(
                f"go install helm {version} took over {BUILD_TIMEOUT_S:.0f} s") from None
        built = scratch / "helm"
        if proc.returncode != 0 or not built.is_file():
            shutil.rmtree(scratch, ignore_errors=True)
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise RuntimeError(
                f"go install helm {version} failed (exit {proc.returncode}):\n{tail}")
        built.rename(binary)
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"kepl helm: built helm {version} in {time.monotonic() - t0:.0f} s",
              file=sys.stderr, flush=True)
    return binary
