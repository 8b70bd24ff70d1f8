"""Integration fixtures beyond the session's server: the same server through a
transaction pooler (PgBouncer), as RDS Proxy multiplexes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import available_migrations
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import database_at
from .transaction_pooler import (
    PoolerUnavailableError,
    TransactionPooler,
    start_transaction_pooler,
)


@pytest.fixture(scope="session")
def transaction_pooler(database: DatabaseUrls) -> Iterator[TransactionPooler]:
    """PgBouncer in transaction mode in front of the session's server. A missing binary
    fails the tests that need it (CI installs it), never skips them."""
    try:
        pooler = start_transaction_pooler(database)
    except PoolerUnavailableError as exc:
        unavailable = str(exc)
    else:
        yield pooler
        pooler.stop()
        return
    pytest.fail(unavailable, pytrace=False)


@pytest.fixture(scope="session")
def pooled_database(transaction_pooler: TransactionPooler) -> DatabaseUrls:
    """The session's database and roles through the pooler: one backend per role, shared
    by every client of that role in turn."""
    return transaction_pooler.urls


@pytest.fixture
def own_database(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[MemoryService, psycopg.Connection[Any]]]:
    """A database of its own, at the latest migration, the command line pointed at it:
    for what reads every organization (an audit of all) or every file (a rewrite)."""
    with database_at(database, admin_conn, available_migrations()[-1].version) as urls:
        monkeypatch.setenv("DATABASE_URL", urls.app)
        monkeypatch.setenv("GRANDBO_ADMIN_DATABASE_URL", urls.admin)
        monkeypatch.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")
        app, owner = connect(urls.app), connect(urls.admin)
        yield MemoryService(MemoryRepository(app), FakeEmbeddingProvider()), owner
        app.close()
        owner.close()
