"""Integration fixtures beyond the session's server: the same server through a
transaction pooler (PgBouncer), as RDS Proxy multiplexes it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grandbo.storage.connections import DatabaseUrls

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
