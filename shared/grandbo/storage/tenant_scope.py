"""The tenant scope every repository runs in: one short transaction bound to one tenant.

Tenant isolation twice over: the transaction-local `grandbo.tenant_id` setting that
row-level security reads (`set_config(..., true)` inside the server's `grandbo_scope`,
never a session-level SET that would leak across pooled connections, nor a set_config
sent by the client, on which RDS Proxy pins), and the explicit `tenant_id = %s` predicate
each repository states in every statement. A connection the server dropped surfaces as
`StoreUnavailableError`, so no caller above the store knows the driver.
"""

from __future__ import annotations

import enum
import os
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

import psycopg
from psycopg.abc import Params, Query
from psycopg.rows import dict_row

from grandbo.errors import StoreUnavailableError
from grandbo.storage.connections import is_idle
from grandbo.tenancy import require_tenant
from grandbo.text.spelling import SPELLING_RULES

Cursor = psycopg.Cursor[dict[str, Any]]


# No unit of work waits on a lock, or sits inside a transaction, without end: past these
# the server gives up (503 upstream, retry) or ends the session and frees what it held.
# The lock wait ends inside the role's 9 s statement_timeout (migration 0031), so a wait
# that gives up says so (lock timeout), not "statement timeout".
_BOUNDED_WAITS = {"lock_timeout": "8s", "idle_in_transaction_session_timeout": "60s"}
# what every tenant transaction states: its bounded waits; that this code writes an
# entry's tags as written with its stems (migration 0043's trigger empties them, for the
# backfill, where a writer that does not say so rewrites the stems); the round of the
# spelling rules of the log's spellings it writes (0042's trigger records it)
_EVERY_SCOPE = {
    **_BOUNDED_WAITS,
    "grandbo.writes_given_tags": "on",
    "grandbo.spelling_rules": str(SPELLING_RULES),
}
# columns a migration added that code deployed ahead of it reads or writes: their
# absence is the store's state (a 503 that says to run the migrations), not a defect (a
# 500); a fallback of its own catches the psycopg error before it leaves the scope
_COLUMN_MIGRATIONS = {
    "given_tags": ("org_memory_entries", "0041"),
    "rules": ("org_memory_retrieval_spellings", "0042"),
}
_MISSING_COLUMN = re.compile(r'column "?(?:\w+\.)?(\w+)"? (?:of relation "\w+" )?does not exist')


def _ahead_of_migration(
    conn: psycopg.Connection[Any], exc: psycopg.errors.UndefinedColumn
) -> str | None:
    """The migration that adds the column `exc` says is missing, if it is one of ours and
    its table really lacks it (the same name missing elsewhere is a defect: None)."""
    found = _MISSING_COLUMN.search(exc.diag.message_primary or "")
    column = found.group(1) if found else ""
    known = _COLUMN_MIGRATIONS.get(column)
    if known is None or conn.closed or not is_idle(conn):
        return None
    table, migration = known
    try:
        with conn.transaction():
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s)"
                " AND attname = %s AND NOT attisdropped)",
                (table, column),
            ).fetchone()
    except psycopg.Error:
        return None
    return migration if row is not None and not row[0] else None


MAINTENANCE_TIMEOUT_ENV = "GRANDBO_MAINTENANCE_STATEMENT_TIMEOUT"


def maintenance_statement_timeout() -> str:
    """A maintenance statement's bound: the function's (its environment), else none."""
    value = os.environ.get(MAINTENANCE_TIMEOUT_ENV, "").strip()
    if not re.fullmatch(r"\d+(ms|s)?", value):
        return "0"
    return value


class TenantLock(enum.Enum):
    """How a transaction holds its tenant's lock (a transaction-level advisory lock).

    Writers of the memory projection share it; a projection rebuild takes it alone, so it
    never replays events while a writer is half way, and writers wait while it swaps the
    projection. Held until commit or rollback; taken before any row lock, so no deadlock.
    """

    NONE = ""
    WRITE = "shared"  # grandbo_scope's names for them
    EXCLUSIVE = "exclusive"


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


# the transaction-level advisory lock each takes (grandbo_scope, or the client before 0031)
_LOCK_FUNCTIONS = {
    TenantLock.WRITE: "pg_advisory_xact_lock_shared",
    TenantLock.EXCLUSIVE: "pg_advisory_xact_lock",
}

# Whether each connection's database has grandbo_scope (migration 0031), asked once per
# connection: code deployed ahead of its migration still scopes its transactions.
_SCOPE_IN_SERVER: weakref.WeakKeyDictionary[psycopg.Connection[Any], bool] = (
    weakref.WeakKeyDictionary()
)


def _scope_statement(
    conn: psycopg.Connection[Any], tenant: str, local: Mapping[str, str], lock: TenantLock
) -> tuple[str, list[Any]]:
    """The statement that opens a tenant transaction: its settings (transaction-local) and
    the tenant's lock, in one round trip. In the server (`grandbo_scope`), where RDS Proxy
    sees no set_config to pin the connection on; before migration 0031, as the client's
    own set_config calls."""
    if conn not in _SCOPE_IN_SERVER:
        row = conn.execute(
            "SELECT to_regprocedure('grandbo_scope(text, text[], text[], text)') IS NOT NULL"
        ).fetchone()
        _SCOPE_IN_SERVER[conn] = bool(row and row[0])
    if _SCOPE_IN_SERVER[conn]:
        return (
            "SELECT grandbo_scope(%s, %s, %s, %s)",
            [tenant, list(local), list(local.values()), lock.value],
        )
    settings = {"grandbo.tenant_id": tenant, **local}
    calls = ["set_config(%s, %s, true)"] * len(settings)
    params: list[Any] = [value for item in settings.items() for value in item]
    if lock is not TenantLock.NONE:
        calls.append(f"{_LOCK_FUNCTIONS[lock]}(hashtextextended(%s, 0))")
        params.append(f"grandbo.tenant:{tenant}")
    return "SELECT " + ", ".join(calls), params


def returned_rows(cur: Cursor) -> Iterator[dict[str, Any]]:
    """Every row an `executemany(..., returning=True)` returned, across its result sets."""
    while True:
        yield from cur.fetchall()
        if not cur.nextset():
            return


class TenantScopedRepository:
    """One connection; every unit of work is a short transaction scoped to one tenant.

    Given a function instead of a connection, the connection is resolved at each use: a
    repository built for a request that never writes never opens the writer (issue 51: a
    question is answered while the writer fails over)."""

    def __init__(
        self, conn: psycopg.Connection[Any] | Callable[[], psycopg.Connection[Any]]
    ) -> None:
        if isinstance(conn, psycopg.Connection):
            self._fixed: psycopg.Connection[Any] | None = conn
            self._resolve: Callable[[], psycopg.Connection[Any]] | None = None
        else:
            self._fixed, self._resolve = None, conn

    @property
    def _conn(self) -> psycopg.Connection[Any]:
        return self._resolve_conn()

    def _resolve_conn(self) -> psycopg.Connection[Any]:
        """The connection for the statement about to run."""
        if self._fixed is not None:
            return self._fixed
        assert self._resolve is not None
        return self._resolve()

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
        local = {**_EVERY_SCOPE, **(settings or {})}
        if lock is TenantLock.EXCLUSIVE or isolation is Isolation.SNAPSHOT:
            # a maintenance transaction (rebuild, its verification, purge, import, a model
            # switch) is not bound by the role's 9 s statement_timeout (migration 0031),
            # but by its function's time where a function runs it (GRANDBO_MAINTENANCE_
            # STATEMENT_TIMEOUT, infra/functions.py); unbounded from the CLI
            local.setdefault("statement_timeout", maintenance_statement_timeout())
        try:
            with (
                _begun_at(self._conn, isolation),
                self._conn.pipeline() if pipelined else nullcontext(),
                self._conn.transaction(),
                self._conn.cursor(row_factory=dict_row) as cur,
            ):
                cur.execute(*_scope_statement(self._conn, tenant, local, lock))
                yield cur
        except psycopg.OperationalError as exc:
            self._discard_unless_idle()
            raise StoreUnavailableError(str(exc)) from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            # a writer demoted mid-failover (or a reader reached as one) refuses writes:
            # the next attempt reaches the new writer, so retry (503), nothing stored
            self._discard_unless_idle()
            raise StoreUnavailableError(f"the database is read-only (a failover?): {exc}") from exc
        except psycopg.errors.UndefinedColumn as exc:
            self._discard_unless_idle()
            migration = _ahead_of_migration(self._conn, exc)
            if migration is None:
                raise
            raise StoreUnavailableError(
                f"the database predates migration {migration} ({exc.diag.message_primary}):"
                " run the migrations"
            ) from exc
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
