"""Connections: the vector type registered, prepared statements off (RDS Proxy-safe),
a bounded wait to connect.

A server that cannot be reached in time is a `StoreUnavailableError` (503), never a driver
error a handler would have to know about.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from grandbo.errors import StoreUnavailableError

APP_ROLE = "grandbo_app"
# How long `connect` waits for a server to accept and authenticate it, unless the URL says
# otherwise (the reader's is shorter: grandbo.runtime.lambda_container). The query function
# has 10 s in all: a saturated RDS Proxy (every database connection borrowed, the client
# queued) must cost a request at most half of that, so it is answered 503 and retried
# instead of timing out with no answer. The proxy's ConnectionBorrowTimeout (infra) is
# derived from this value. psycopg applies it to each address the host resolves to.
CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True, slots=True)
class DatabaseUrls:
    admin: str
    app: str


def connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """One autocommit connection; the repository opens explicit, short transactions.

    Within CONNECT_TIMEOUT_S, or the URL's own `connect_timeout`.
    """
    try:
        conn = psycopg.connect(_with_connect_timeout(url), autocommit=True, prepare_threshold=None)
        register_vector(conn)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(str(exc)) from exc
    return conn


def _with_connect_timeout(url: str) -> str:
    """`url` with `connect_timeout` (CONNECT_TIMEOUT_S) unless it sets its own."""
    params = conninfo_to_dict(url)
    if params.get("connect_timeout") not in (None, ""):
        return url
    return make_conninfo(url, connect_timeout=str(CONNECT_TIMEOUT_S))


def app_url_for(admin_url: str) -> str:
    """The same server and database, as the application role (local trust auth)."""
    return url_as(admin_url, APP_ROLE)


def url_as(url: str, role: str) -> str:
    """The same server and database as `role`, without a password (local trust auth)."""
    params = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    params.pop("password", None)
    params["user"] = role
    return make_conninfo("", **params)


def in_recovery(conn: psycopg.Connection[Any]) -> bool:
    """Whether `conn` is served by a replica (an Aurora reader): pg_is_in_recovery().
    StoreUnavailableError if the connection drops."""
    try:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(str(exc)) from exc
    return bool(row and row[0])


def is_idle(conn: psycopg.Connection[Any]) -> bool:
    """Outside any transaction and pipeline: safe to hand to the next unit of work."""
    return (
        conn.info.transaction_status == pq.TransactionStatus.IDLE
        and conn.pgconn.pipeline_status == pq.PipelineStatus.OFF
    )
