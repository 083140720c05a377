"""Pytest plugin: a real schema registry for tests that take the ``schema_registry``
fixture (its Confluent-compatible URL).

``KEPL_TEST_REGISTRY_URL`` set: that registry as is.  Otherwise kepl's own
(``app.registry.local_registry``: Apicurio, in memory) on a free port, started once per
session and stopped at its end.  Never skipped: the fixture fails with the reason if no
registry can be had.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from app.registry import local_registry


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((local_registry.HOST, 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("KEPL_TEST_REGISTRY_URL")
    if external:
        yield external.rstrip("/")
        return
    port = _free_port()
    data_dir = tmp_path_factory.mktemp("registry")
    try:
        info = local_registry.start(port, data_dir, die_with_parent=True)
    except local_registry.RegistryError as e:
        pytest.fail(f"no schema registry: {e}")
    try:
        yield info.url
    finally:
        local_registry.stop(port, data_dir)
