"""Connections: the vector type registered, prepared statements off (RDS Proxy-safe).

Locally, `local_database` starts the embedded PostgreSQL and returns the URLs of the
schema owner and of the application role; with `DATABASE_URL` set, that server is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from grandbo.settings import Settings

APP_ROLE = "grandbo_app"


@dataclass(frozen=True, slots=True)
class DatabaseUrls:
    admin: str
    app: str


def connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """One autocommit connection; the repository opens explicit, short transactions."""
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=None)
    register_vector(conn)
    return conn


def app_url_for(admin_url: str) -> str:
    """The same server and database, as the application role (local trust auth)."""
    params = {k: str(v) for k, v in conninfo_to_dict(admin_url).items() if v is not None}
    params.pop("password", None)
    params["user"] = APP_ROLE
    return make_conninfo("", **params)


def resolve_urls(settings: Settings) -> DatabaseUrls:
    """URLs from settings, starting the embedded PostgreSQL when none is configured."""
    if settings.database_url:
        admin = settings.admin_database_url or settings.database_url
        return DatabaseUrls(admin=admin, app=settings.database_url)
    from grandbo.local_postgres import start_embedded_postgres

    admin = start_embedded_postgres(settings.data_dir)
    return DatabaseUrls(admin=admin, app=app_url_for(admin))
