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
from infra.functions import SPECS

from grandbo.memory.repository import MemoryRepository
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.storage.tenant_scope import Isolation, TenantLock


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
