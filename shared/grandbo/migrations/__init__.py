"""Versioned SQL migrations and the one command that applies them.

Files are `NNNN_name.sql`, applied in order, each in its own transaction, recorded with
its checksum in `grandbo_schema_migrations`. A transaction-level advisory lock serializes
concurrent deploys; an edited, already-applied file is refused rather than silently skipped.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


# How long a run waits for another deploy's lock before it says so, and for a server to
# accept its connection. PostgreSQL keeps running a statement whose client went away (a
# function that timed out), under its locks: the retried deploy would wait on them without
# end, so every wait is bounded and every statement ends by the caller's deadline.
LOCK_WAIT_S = 60.0
CONNECT_TIMEOUT_S = 10


def migrate(
    admin_url: str,
    *,
    up_to: int | None = None,
    deadline: float | None = None,
    lock_wait_s: float = LOCK_WAIT_S,
) -> list[Migration]:
    """Apply every pending migration (through version `up_to`, if given) as the schema
    owner; return those applied now.

    Each transaction takes the deploys' advisory lock itself (`pg_advisory_xact_lock`,
    released at its commit) and reads what is applied under it. A session-level lock held
    only because RDS Proxy pins the session that takes one; a transaction pooler hands the
    backend to the next client after each statement, and that client then holds the
    "same" lock as well (it is re-entrant within a session), while the unlock may reach
    another backend and leave it held for ever. Prepared statements are off for the same
    reason: one stays on whichever backend it was prepared on.

    Bounded: a lock is waited for at most `lock_wait_s`, and with a `deadline` (a
    `time.monotonic()` value: the migrations function passes its own time left less a
    margin) each statement ends by it; either raises MigrationError saying which
    migration timed out. A migration is one transaction, so one that times out leaves
    nothing of itself: the schema stays at the version before it.
    """
    applied_now: list[Migration] = []
    with psycopg.connect(
        admin_url, autocommit=True, prepare_threshold=None, connect_timeout=CONNECT_TIMEOUT_S
    ) as conn:
        with _bounded(conn, "the migrations table", deadline, lock_wait_s):
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
            label = f"migration {migration.version:04d}_{migration.name}"
            with _bounded(conn, label, deadline, lock_wait_s):
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


# Under this much time left a migration is not started: rounded to milliseconds a
# smaller bound could become 0, which PostgreSQL reads as no limit at all.
MIN_TIME_LEFT_S = 1.0
# `transaction_timeout` bounds a whole transaction (PostgreSQL 17+; Aurora PostgreSQL
# 17.5 has it). `statement_timeout` alone bounds each statement of a multi-statement
# migration separately, so together they could outlast the function.
TRANSACTION_TIMEOUT_SINCE = 170000


@contextmanager
def _bounded(
    conn: psycopg.Connection[Any], label: str, deadline: float | None, lock_wait_s: float
) -> Iterator[None]:
    """One transaction whose lock waits, statements and whole run are bounded
    (transaction-local settings: nothing stays on the backend), a timeout reported as
    such."""
    left_s = None if deadline is None else deadline - time.monotonic()
    if left_s is not None and left_s < MIN_TIME_LEFT_S:
        raise MigrationError(f"{label}: no time left to start it; nothing of it was applied")
    lock_s = lock_wait_s if left_s is None else min(lock_wait_s, left_s)
    settings = {"lock_timeout": f"{max(1, int(lock_s * 1000))}ms"}
    if left_s is not None:
        bound = f"{int(left_s * 1000)}ms"
        settings["statement_timeout"] = bound
        if conn.info.server_version >= TRANSACTION_TIMEOUT_SINCE:
            settings["transaction_timeout"] = bound
    try:
        with conn.transaction():
            conn.execute(
                "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in settings),
                [value for item in settings.items() for value in item],
            )
            yield
    except psycopg.errors.LockNotAvailable as exc:
        raise MigrationError(
            f"{label}: waited {lock_s:g} s for a lock another session holds (another "
            "deploy's migration, or a statement still running after its function timed "
            "out: see pg_stat_activity); nothing of it was applied"
        ) from exc
    except (psycopg.errors.QueryCanceled, psycopg.errors.TransactionTimeout) as exc:
        raise MigrationError(
            f"{label} timed out: it did not finish in the {left_s or 0:.0f} s left and was "
            "rolled back; apply it with `grandbo migrate` from a host that can wait "
            "(docs/OPERATIONS.md), then deploy again"
        ) from exc


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
