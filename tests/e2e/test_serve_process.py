"""`grandbo serve` as a process, the way an operator runs it (issue 11, item 12): it
restarts its embedded PostgreSQL when that dies, answers 503 meanwhile, and stops it on
SIGTERM even after an earlier runner was killed outright."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from grandbo.api.auth import Keyring, mint_query_token
from grandbo.api.client import user_agent

from .readiness import READY_WITHIN_S, until_ready

TOPIC = "the payments database ran out of connections after a deploy and requests timed out"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [
            *(sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir)),
            *("--provider", "fake", "serve", "--port", str(port), "--containers", "2"),
            *("--console-port", "0"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, "grandbo serve exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            time.sleep(0.3)
    raise AssertionError("grandbo serve did not start")


def _query(port: int, data_dir: Path) -> int:
    keyring = Keyring.from_json((data_dir / "keyring.json").read_text())
    token = mint_query_token(keyring.find("demo-beacon", "query"))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(
            "POST",
            "/v1/memory/query",
            body=json.dumps({"topic": TOPIC}),
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "User-Agent": user_agent("e2e-tests"),
            },
        )
        return conn.getresponse().status
    finally:
        conn.close()


def _cli(data_dir: Path, *argv: str) -> tuple[int, str]:
    base = [sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir), "--provider", "fake"]
    summary = ["--summary", "two cron runs overlapped and doubled the load on the reports database"]
    done = subprocess.run(  # noqa: S603 - our own CLI
        [*base, *argv, *(summary if argv[0] == "add" else [])],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout


def _lacking_vectors(data_dir: Path, tenant: str) -> int:
    code, out = _cli(data_dir, "query", "--tenant", tenant, "--json", TOPIC)
    assert code == 0, out
    return int(json.loads(out)["metadata"]["active_entries_without_current_vector"])


def _postgres(data_dir: Path) -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "postgres" in " ".join(p.info["cmdline"] or [])
        and str(data_dir) in " ".join(p.info["cmdline"] or [])
    ]


def _postmaster(data_dir: Path) -> int:
    return int((data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


@pytest.mark.skipif(os.environ.get("GRANDBO_TEST_DATABASE_URL") is not None, reason="embedded")
def test_serve_survives_its_database_dying_and_stops_it_on_sigterm(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", _port()
    # Given a runner that was killed outright, leaving its PostgreSQL and its holder entry
    first = _start(data_dir, port)
    first.kill()
    first.wait()
    assert _postgres(data_dir)
    # and an entry of another organization written meanwhile, with no embed queue to tell
    add = ["add", "--tenant", "other-org", "--create-tenant", "--title", "Cron overlap"]
    assert _cli(data_dir, *add)[0] == 0
    # and the user's own topology loaded into the demo organization (issue 34, point 10:
    # each start re-synced the demo's, closing these nodes)
    mine = tmp_path / "topology.json"
    mine.write_text(
        json.dumps(
            {
                "nodes": [
                    {"node_type": "Service", "external_id": "api-gateway"},
                    {"node_type": "Service", "external_id": "checkout-api"},
                ],
                "edges": [
                    {
                        "source": {"node_type": "Service", "external_id": "api-gateway"},
                        "edge_type": "DEPENDS_ON",
                        "target": {"node_type": "Service", "external_id": "checkout-api"},
                    }
                ],
            }
        )
    )
    assert _cli(data_dir, "topology", "load", str(mine), "--sync", "--tenant", "demo")[0] == 0
    # When a new runner serves on the same data
    runner = _start(data_dir, port)
    try:
        assert _query(port, data_dir) == 200
        # the restart changed nothing the user wrote: their topology is still the current one
        code, out = _cli(data_dir, "topology", "blast-radius", "--id", "checkout-api")
        assert code == 0, out
        assert "api-gateway" in out
        code, out = _cli(data_dir, "topology", "blast-radius", "--id", "postgres-main")
        assert "payments" not in out  # the demo's dependencies were not synced back
        # a write from the command line while it runs is embedded before the command
        # returns, and says so (issue 34, point 11: it waited for `embed-pending`)
        add = ["add", "--tenant", "cli-org", "--create-tenant", "--title", "Cron overlap again"]
        code, out = _cli(data_dir, *add)
        assert code == 0, out
        assert "embedded: searchable by meaning now" in out
        assert _lacking_vectors(data_dir, "cli-org") == 0
        # its start-up sweep covered every organization, not only the demo one
        until_ready(
            lambda: _lacking_vectors(data_dir, "other-org") == 0 or None,
            "the start-up sweep embedding the other organization's entry",
        )
        # and its PostgreSQL is killed, then requests get 503 and service resumes by itself:
        # polled until it answers three times running (a loaded machine restarts it slower)
        os.kill(_postmaster(data_dir), signal.SIGKILL)
        statuses: list[int] = []

        def serving_again() -> bool | None:
            statuses.append(_query(port, data_dir))
            return True if statuses[-3:] == [200, 200, 200] else None

        # a request cut or timed out while the server restarts is no answer yet
        until_ready(
            serving_again,
            "grandbo serve answering after the crash",
            not_yet=(OSError, http.client.HTTPException),
        )
        assert set(statuses) <= {200, 503}, statuses
    finally:
        # Then SIGTERM stops the runner and its PostgreSQL too
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=READY_WITHIN_S) == 0
    until_ready(lambda: _postgres(data_dir) == [] or None, "its PostgreSQL stopping")
