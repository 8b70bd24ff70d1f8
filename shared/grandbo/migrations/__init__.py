"""Versioned SQL migrations and the one command that applies them.

Files are `NNNN_name.sql`, applied in order, each in its own transaction, recorded with
its checksum in `grandbo_schema_migrations`. A transaction-level advisory lock serializes
concurrent deploys; an edited, already-applied file is refused rather than silently skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from grandbo.errors import MigrationError

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x6772616E64626F  # "grandbo"


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available_migrations() -> list[Migration]:
    found = []
    for item in resources.files(__package__).iterdir():
        match = _FILE.match(item.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), item.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"migration versions must run 1..n without gaps, found {versions}")
    return found


def migrations_digest() -> str:
    """One hash of every bundled migration (names and text): the deploy's custom resource
    carries it, so CloudFormation re-runs it when a migration changes, and the function
    knows an event meant for another set of migrations (a rollback) when it sees one."""
    digest = hashlib.sha256()
    for migration in available_migrations():
        digest.update(f"{migration.version:04d}_{migration.name}.sql".encode())
        digest.update(migration.sql.encode())
    return digest.hexdigest()


def migrate(admin_url: str, *, up_to: int | None = None) -> list[Migration]:
    """Apply every pending migration (through version `up_to`, if given) as the schema
    owner; return those applied now.

    Each transaction takes the deploys' advisory lock itself (`pg_advisory_xact_lock`,
    released at its commit) and reads what is applied under it. A session-level lock held
    only because RDS Proxy pins the session that takes one; a transaction pooler hands the
    backend to the next client after each statement, and that client then holds the
    "same" lock as well (it is re-entrant within a session), while the unlock may reach
    another backend and leave it held for ever. Prepared statements are off for the same
    reason: one stays on whichever backend it was prepared on.
    """
    applied_now: list[Migration] = []
    with psycopg.connect(admin_url, autocommit=True, prepare_threshold=None) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS grandbo_schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = _applied(conn)
        for migration in available_migrations():
            if up_to is not None and migration.version > up_to:
                break
            if migration.version in done:
                _check_unchanged(migration, done[migration.version])
                continue
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                # another deploy may have applied it while this one waited for the lock
                checksum = _applied(conn, migration.version).get(migration.version)
                if checksum is not None:
                    _check_unchanged(migration, checksum)
                    continue
                conn.execute(migration.sql.encode())
                conn.execute(
                    "INSERT INTO grandbo_schema_migrations (version, name, checksum)"
                    " VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            applied_now.append(migration)
    return applied_now


def _applied(conn: psycopg.Connection[Any], version: int | None = None) -> dict[int, str]:
    """The applied versions (or only `version`) and their checksums."""
    rows = conn.execute(
        "SELECT version, checksum FROM grandbo_schema_migrations"
        " WHERE %(version)s::integer IS NULL OR version = %(version)s",
        {"version": version},
    ).fetchall()
    return {applied: checksum for applied, checksum in rows}


def _check_unchanged(migration: Migration, checksum: str) -> None:
    if checksum != migration.checksum:
        raise MigrationError(
            f"migration {migration.version}_{migration.name} changed after it "
            "was applied; add a new migration instead of editing it"
        )


def set_app_role_password(admin_url: str, password: str) -> None:
    """Give the application role its password (from its Secrets Manager secret)."""
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE grandbo_app WITH LOGIN PASSWORD {}").format(sql.Literal(password))
        )
