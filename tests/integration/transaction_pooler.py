"""PgBouncer in transaction mode in front of the test server: what RDS Proxy does between
a client's transactions (hands its backend to the next client), without its pinning.

Started like the embedded server, by the tests themselves: Debian's `pgbouncer` binary,
listening on a Unix socket in a directory of its own, one server connection per database
and role (two clients of one role share one backend), trust auth as the embedded server.
PgBouncer refuses to run as root; as root it runs as the owner of the server's socket
directory (the embedded server's own user), which can reach that socket.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from grandbo.storage.connections import DatabaseUrls

PORT = 6432
READY_WITHIN_S = 10.0
# a client that waits this long for the one backend of its pool fails instead of hanging
# the suite (a test that left a transaction open, a lock order that cannot resolve)
QUERY_WAIT_TIMEOUT_S = 15


class PoolerUnavailableError(RuntimeError):
    """PgBouncer is not installed or did not start."""


@dataclass(frozen=True, slots=True)
class TransactionPooler:
    process: subprocess.Popen[bytes]
    workdir: Path
    urls: DatabaseUrls

    def url_for(self, url: str) -> str:
        """`url`'s database and role, through the pooler."""
        return _through(self.workdir, url)

    def log(self) -> str:
        return (self.workdir / "pgbouncer.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # PgBouncer: fast shutdown
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def pgbouncer_binary() -> str:
    """The `pgbouncer` executable (Debian installs it in /usr/sbin, off a user's PATH)."""
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")
    if found is None:
        raise PoolerUnavailableError(
            "pgbouncer is not installed; the transaction-pooler tests need it "
            "(Debian/Ubuntu: apt-get install -y --no-install-recommends pgbouncer; "
            ".ci/run installs it)"
        )
    return found


def start_transaction_pooler(database: DatabaseUrls, *, pool_size: int = 1) -> TransactionPooler:
    """PgBouncer (pool_mode=transaction, `pool_size` backends per database and role) in
    front of the server `database` names; its URLs are `database`'s through the pooler."""
    binary = pgbouncer_binary()
    server = conninfo_to_dict(database.admin)
    host = str(server.get("host") or "/tmp")
    run_as = _unprivileged_user(host) if os.geteuid() == 0 else None
    # under /tmp itself: a pytest temporary directory is private to root, and PgBouncer
    # binds its socket after dropping to `run_as`
    workdir = Path(tempfile.mkdtemp(prefix="grandbo-pgbouncer-"))
    if run_as is not None:
        os.chown(workdir, run_as.pw_uid, run_as.pw_gid)
    (workdir / "userlist.txt").write_text(_auth_file(database))
    (workdir / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={host} port={server.get('port') or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr =\n"
        f"unix_socket_dir = {workdir}\n"
        f"listen_port = {PORT}\n"
        "auth_type = trust\n"
        f"auth_file = {workdir / 'userlist.txt'}\n"
        "pool_mode = transaction\n"
        # one backend per database and role: two clients of a role really share it
        f"default_pool_size = {pool_size}\n"
        "reserve_pool_size = 0\n"
        "max_client_conn = 200\n"
        f"query_wait_timeout = {QUERY_WAIT_TIMEOUT_S}\n"
        # a refused server login (the server restarting) is retried soon, not in 15 s
        "server_login_retry = 1\n"
        # PgBouncer 1.18 (Debian 12) has no max_prepared_statements: a statement a client
        # prepares stays on whichever backend it reached, so clients prepare none
        # (psycopg's prepare_threshold=None, as for RDS Proxy)
        "log_connections = 0\n"
        "log_disconnections = 0\n"
    )
    command = [binary, str(workdir / "pgbouncer.ini")]
    if run_as is not None:
        command[1:1] = ["-u", run_as.pw_name]
    with (workdir / "pgbouncer.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
    pooler = TransactionPooler(
        process,
        workdir,
        DatabaseUrls(admin=_through(workdir, database.admin), app=_through(workdir, database.app)),
    )
    _wait_ready(pooler)
    return pooler


def _through(workdir: Path, url: str) -> str:
    params = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    params.pop("hostaddr", None)
    params.update(host=str(workdir), port=str(PORT))
    return make_conninfo("", **params)


def _unprivileged_user(host: str) -> pwd.struct_passwd:
    """Who PgBouncer runs as under root: the owner of the server's socket directory (the
    embedded server runs as its own user), or nobody for a server reached over TCP."""
    with contextlib.suppress(OSError, KeyError):
        if host.startswith("/") and (owner := os.stat(host).st_uid) != 0:
            return pwd.getpwuid(owner)
    return pwd.getpwnam("nobody")


def _auth_file(database: DatabaseUrls) -> str:
    """Every login role of the server (trust auth still looks the name up here), with the
    URLs' passwords, which PgBouncer then uses to log in to the server."""
    passwords = {}
    for url in (database.admin, database.app):
        params = conninfo_to_dict(url)
        passwords[str(params.get("user"))] = str(params.get("password") or "")
    with psycopg.connect(database.admin, autocommit=True) as conn:
        roles = [row[0] for row in conn.execute("SELECT rolname FROM pg_roles WHERE rolcanlogin")]
    return "".join(
        '"{}" "{}"\n'.format(role.replace('"', '""'), passwords.get(role, "").replace('"', '""'))
        for role in sorted({*roles, *passwords})
    )


def _wait_ready(pooler: TransactionPooler) -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while True:
        if pooler.process.poll() is not None:
            raise PoolerUnavailableError(f"pgbouncer exited at start:\n{pooler.log()}")
        try:
            with psycopg.connect(pooler.urls.app, prepare_threshold=None, connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                pooler.stop()
                raise PoolerUnavailableError(
                    f"pgbouncer did not answer within {READY_WITHIN_S:.0f} s: {exc}\n{pooler.log()}"
                ) from exc
            time.sleep(0.05)
