"""Connections: the vector type registered, prepared statements off (RDS Proxy-safe).

A server that cannot be reached is a `StoreUnavailableError` (503), never a driver error
a handler would have to know about.
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


@dataclass(frozen=True, slots=True)
class DatabaseUrls:
    admin: str
    app: str


def connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """One autocommit connection; the repository opens explicit, short transactions."""
    try:
        conn = psycopg.connect(url, autocommit=True, prepare_threshold=None)
        register_vector(conn)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(str(exc)) from exc
    return conn


def app_url_for(admin_url: str) -> str:
    """The same server and database, as the application role (local trust auth)."""
    return url_as(admin_url, APP_ROLE)


def url_as(url: str, role: str) -> str:
    """The same server and database as `role`, without a password (local trust auth)."""
    params = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    params.pop("password", None)
    params["user"] = role
    return make_conninfo("", **params)


def is_idle(conn: psycopg.Connection[Any]) -> bool:
    """Outside any transaction and pipeline: safe to hand to the next unit of work."""
    return (
        conn.info.transaction_status == pq.TransactionStatus.IDLE
        and conn.pgconn.pipeline_status == pq.PipelineStatus.OFF
    )
