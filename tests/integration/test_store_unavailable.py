"""A lost database connection is a domain error (503 upstream), never a driver error."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from grandbo.api.nonces import NonceStore
from grandbo.errors import EntryNotFoundError, StoreUnavailableError
from grandbo.memory.repository import MemoryRepository
from grandbo.storage.connections import CONNECT_TIMEOUT_S, DatabaseUrls, connect
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


@contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections and never says a word: a proxy
    with every database connection borrowed, as a client sees it. Yields the port."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        acceptor.join()
        for conn in held:
            conn.close()
        listener.close()


def test_a_server_that_accepts_and_never_answers_is_store_unavailable_within_the_bound() -> None:
    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="timeout"):
            connect(f"host=127.0.0.1 port={port} dbname=grandbo user=grandbo_app")
        waited = time.monotonic() - started
    # the query function has 10 s in all: the 503 comes with time to spare
    assert CONNECT_TIMEOUT_S - 0.5 <= waited < CONNECT_TIMEOUT_S + 1.5


def test_a_url_with_its_own_connect_timeout_keeps_it() -> None:
    # the reader's URL asks for 2 s (READER_CONNECT_TIMEOUT_S): the writer answers sooner
    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            connect(f"host=127.0.0.1 port={port} dbname=grandbo connect_timeout=2")
        waited = time.monotonic() - started
    assert 1.5 <= waited < 3.0


def test_domain_errors_pass_through_the_scope_unchanged(
    repository: MemoryRepository, tenant: str
) -> None:
    with pytest.raises(EntryNotFoundError):
        repository.get_entry(tenant, uuid4())
