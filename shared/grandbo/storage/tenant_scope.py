"""The tenant scope every repository runs in: one short transaction bound to one tenant.

Tenant isolation twice over: the transaction-local `grandbo.tenant_id` setting that
row-level security reads (`set_config(..., true)`, never a session-level SET that would
leak across pooled connections), and the explicit `tenant_id = %s` predicate each
repository states in every statement. A connection the server dropped surfaces as
`StoreUnavailableError`, so no caller above the store knows the driver.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

import psycopg
from psycopg.abc import Params, Query
from psycopg.rows import dict_row

from grandbo.errors import StoreUnavailableError
from grandbo.storage.connections import is_idle
from grandbo.tenancy import require_tenant

Cursor = psycopg.Cursor[dict[str, Any]]


# No unit of work waits on a lock, or sits inside a transaction, without end: past these
# the server gives up (503 upstream, retry) or ends the session and frees what it held.
_BOUNDED_WAITS = {"lock_timeout": "10s", "idle_in_transaction_session_timeout": "60s"}


class TenantLock(enum.Enum):
    """How a transaction holds its tenant's lock (a transaction-level advisory lock).

    Writers of the memory projection share it; a projection rebuild takes it alone, so it
    never replays events while a writer is half way, and writers wait while it swaps the
    projection. Held until commit or rollback; taken before any row lock, so no deadlock.
    """

    NONE = ""
    WRITE = "pg_advisory_xact_lock_shared"
    EXCLUSIVE = "pg_advisory_xact_lock"


class Isolation(enum.Enum):
    READ_COMMITTED = None
    # one snapshot for every statement: what a verification that must not see a writer's
    # commit between two of its reads needs. Asked for in the BEGIN itself: a `SET
    # TRANSACTION` is a SET statement (RDS Proxy pins on SET) and leaves its mark on the
    # backend after commit (`transaction_isolation` with source 'session').
    SNAPSHOT = psycopg.IsolationLevel.REPEATABLE_READ


@contextmanager
def _begun_at(conn: psycopg.Connection[Any], isolation: Isolation) -> Iterator[None]:
    """The transaction opened inside begins at `isolation` (psycopg writes the connection's
    level into its BEGIN); the connection's own level is back to the server's after."""
    if isolation.value is None:
        yield
        return
    conn.isolation_level = isolation.value
    try:
        yield
    finally:
        if not conn.closed and is_idle(conn):  # else the scope closes it
            conn.isolation_level = None


def returned_rows(cur: Cursor) -> Iterator[dict[str, Any]]:
    """Every row an `executemany(..., returning=True)` returned, across its result sets."""
    while True:
        yield from cur.fetchall()
        if not cur.nextset():
            return


class TenantScopedRepository:
    """One connection; every unit of work is a short transaction scoped to one tenant."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @contextmanager
    def _tenant_scope(
        self,
        tenant_id: str,
        settings: Mapping[str, str] | None = None,
        *,
        lock: TenantLock = TenantLock.NONE,
        isolation: Isolation = Isolation.READ_COMMITTED,
        pipelined: bool = False,
    ) -> Iterator[Cursor]:
        """A transaction bound to one tenant, plus any transaction-local `settings`.

        `pipelined`: the transaction runs in pipeline mode, so statements sent one after
        another (`_sent`) share a round trip, each result read when it is needed.
        """
        tenant = require_tenant(tenant_id)
        local = {"grandbo.tenant_id": tenant, **_BOUNDED_WAITS, **(settings or {})}
        calls = ["set_config(%s, %s, true)"] * len(local)
        params: list[str] = [value for item in local.items() for value in item]
        if lock is not TenantLock.NONE:
            calls.append(f"{lock.value}(hashtextextended(%s, 0))")
            params.append(f"grandbo.tenant:{tenant}")
        try:
            with (
                _begun_at(self._conn, isolation),
                self._conn.pipeline() if pipelined else nullcontext(),
                self._conn.transaction(),
                self._conn.cursor(row_factory=dict_row) as cur,
            ):
                # one round trip: set_config(..., true) is SET LOCAL, the lock is the tenant's
                cur.execute("SELECT " + ", ".join(calls), params)
                yield cur
        except psycopg.OperationalError as exc:
            self._discard_unless_idle()
            raise StoreUnavailableError(str(exc)) from exc
        except BaseException:
            self._discard_unless_idle()
            raise

    def _tenant_statement(
        self, tenant_id: str, query: Query, params: Params
    ) -> list[dict[str, Any]]:
        """The rows of one statement that scopes itself to the tenant (a function that sets
        grandbo.tenant_id for its own transaction and states tenant_id in every statement:
        grandbo_search), run alone on the autocommit connection: no BEGIN, no set_config,
        no COMMIT, one round trip. Results come in binary (fewer bytes to decode)."""
        require_tenant(tenant_id)
        if not self._conn.autocommit:  # inside a caller's transaction it would stay open
            raise RuntimeError("a self-scoped statement needs an autocommit connection")
        try:
            with self._conn.cursor(row_factory=dict_row) as cur:
                cur.execute(query, params, binary=True)
                return cur.fetchall()
        except psycopg.OperationalError as exc:
            self._discard_unless_idle()
            raise StoreUnavailableError(str(exc)) from exc
        except BaseException:
            self._discard_unless_idle()
            raise

    def _sent(self, query: Query, params: Params) -> Cursor:
        """`query` sent on a cursor of its own, its result read later (in a pipelined
        scope, statements sent one after another share a round trip)."""
        cur = self._conn.cursor(row_factory=dict_row)
        cur.execute(query, params)
        return cur

    def _discard_unless_idle(self) -> None:
        """A failed unit of work whose rollback did not finish (a pipeline cut short, a
        lost server) leaves the connection inside a transaction, holding its locks while
        the next caller would queue behind them: close it instead (the owner reconnects)."""
        if not self._conn.closed and not is_idle(self._conn):
            self._conn.close()

    @contextmanager
    def _unscoped(self) -> Iterator[psycopg.Cursor[tuple[Any, ...]]]:
        """A plain cursor for what is not tenant data (the list of tenant ids)."""
        try:
            with self._conn.cursor() as cur:
                yield cur
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(str(exc)) from exc
