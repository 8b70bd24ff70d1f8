"""Issue 35, point 6: no statement of the application role outlives its function.

RDS Proxy does not pass a client's CancelRequest on to the database, so a search whose
Lambda timed out kept its backend busy until it finished. Migration 0031 gives the role a
default statement_timeout of 9 s (inside the query function's 10 s): every session of the
role has it, the self-scoped search too, with nothing sent by the client (a SET would pin
the proxy connection). Maintenance transactions, under the tenant's exclusive lock or a
snapshot, lift it for themselves.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from infra.functions import SPECS

from grandbo.memory.repository import MemoryRepository
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.storage.tenant_scope import MAINTENANCE_TIMEOUT_ENV, Isolation, TenantLock


def _in_scope(conn: psycopg.Connection[Any], tenant: str, **scope: Any) -> str:
    with MemoryRepository(conn)._tenant_scope(tenant, **scope) as cur:
        cur.execute("SELECT current_setting('statement_timeout') AS t")
        row = cur.fetchone()
        assert row is not None
        return str(row["t"])


def test_the_app_role_ends_a_statement_before_the_query_function_ends(
    database: DatabaseUrls, tenant: str
) -> None:
    with connect(database.app) as conn:
        row = conn.execute("SHOW statement_timeout").fetchone()
        assert row == ("9s",)
        assert SPECS["query"].timeout_s > 9
        assert _in_scope(conn, tenant) == "9s"
        assert _in_scope(conn, tenant, lock=TenantLock.WRITE) == "9s"
        # maintenance lifts it for its own transaction only
        assert _in_scope(conn, tenant, lock=TenantLock.EXCLUSIVE) == "0"
        assert _in_scope(conn, tenant, isolation=Isolation.SNAPSHOT) == "0"
        assert conn.execute("SHOW statement_timeout").fetchone() == ("9s",)


def test_in_a_function_a_maintenance_statement_ends_before_the_function_does(
    database: DatabaseUrls, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin function (15 s) runs rebuilds, purges and an import's last batch: their
    bound is the function's less a second (infra/functions.py sets it), not none."""
    monkeypatch.setenv(MAINTENANCE_TIMEOUT_ENV, "14s")
    with connect(database.app) as conn:
        assert _in_scope(conn, tenant, lock=TenantLock.EXCLUSIVE) == "14s"
        assert _in_scope(conn, tenant, isolation=Isolation.SNAPSHOT) == "14s"
        assert _in_scope(conn, tenant) == "9s"  # the rest keep the role's
    monkeypatch.setenv(MAINTENANCE_TIMEOUT_ENV, "14s; SET role postgres")
    with connect(database.app) as conn:  # not a duration: no bound is read from it
        assert _in_scope(conn, tenant, lock=TenantLock.EXCLUSIVE) == "0"


def test_a_lock_wait_gives_up_as_a_lock_timeout_inside_the_statement_bound(
    database: DatabaseUrls, tenant: str
) -> None:
    """The tenant scope's lock wait (8 s) ends before the role's 9 s statement bound, so
    it is reported as what it is."""
    from grandbo.storage.tenant_scope import _BOUNDED_WAITS

    assert _BOUNDED_WAITS["lock_timeout"] == "8s"  # under the role's 9 s
    from grandbo.errors import StoreUnavailableError

    holder = connect(database.app)
    waiter = connect(database.app)
    try:
        with MemoryRepository(holder)._tenant_scope(tenant, lock=TenantLock.WRITE):
            # the scope's own 8 s, shortened for the test: a 503 whose cause is the lock
            # wait (LockNotAvailable), never the statement bound (QueryCanceled)
            with pytest.raises(StoreUnavailableError, match="lock timeout") as raised:
                _in_scope(
                    waiter, tenant, lock=TenantLock.EXCLUSIVE, settings={"lock_timeout": "200ms"}
                )
            assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
    finally:
        holder.close()
        waiter.close()
