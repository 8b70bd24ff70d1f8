"""A lost database connection is a domain error (503 upstream), never a driver error."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import psycopg
import pytest

from grandbo.api.nonces import NonceStore
from grandbo.errors import EntryNotFoundError, StoreUnavailableError
from grandbo.memory.repository import MemoryRepository
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.topology.repository import TopologyRepository


def _terminated(database: DatabaseUrls, admin_conn: psycopg.Connection[Any]) -> Any:
    conn = connect(database.app)
    pid = conn.info.backend_pid
    admin_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return conn


def test_a_dropped_connection_surfaces_as_store_unavailable(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    # Given a repository whose server-side session was killed
    repository = MemoryRepository(_terminated(database, admin_conn))
    # When it is used, then the caller sees the domain error, with the driver's as cause
    with pytest.raises(StoreUnavailableError) as raised:
        repository.get_entry(tenant, uuid4())
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    with pytest.raises(StoreUnavailableError):
        MemoryRepository(_terminated(database, admin_conn)).tenant_ids()
    with pytest.raises(StoreUnavailableError):
        NonceStore(_terminated(database, admin_conn)).claim_nonce(tenant, "k", "n", 60)
    with pytest.raises(StoreUnavailableError):
        TopologyRepository(_terminated(database, admin_conn)).graph_version(tenant)


def test_an_unreachable_server_is_store_unavailable(tmp_path: Any) -> None:
    with pytest.raises(StoreUnavailableError):
        connect(f"postgresql:///nowhere?host={tmp_path}&connect_timeout=1")


def test_domain_errors_pass_through_the_scope_unchanged(
    repository: MemoryRepository, tenant: str
) -> None:
    with pytest.raises(EntryNotFoundError):
        repository.get_entry(tenant, uuid4())
