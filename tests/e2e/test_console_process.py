"""`grandbo console` as a process, the way a new user runs it after the README: on the
embedded store, it prints a one-time login link, the link opens a session, and the
search page answers for the demo organization through the signed admin API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from grandbo.local.demo import DEMO_TOPIC

from .console_process import console_get, free_port, login_link


@pytest.mark.skipif(os.environ.get("GRANDBO_TEST_DATABASE_URL") is not None, reason="embedded")
def test_the_console_command_opens_on_the_local_store(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [
            *(sys.executable, "-m", "grandbo.cli", "--data-dir", str(tmp_path / "data")),
            *("--provider", "fake", "console", "--port", str(port)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        link = login_link(process)
        parts = urlsplit(link)
        assert parts.port == port
        status, headers, _ = console_get(port, f"{parts.path}?{parts.query}")
        assert status == 303
        cookie = headers["set-cookie"]
        assert "httponly" in cookie.lower()
        assert "samesite=strict" in cookie.lower()
        session = cookie.split(";")[0]
        status, _, page = console_get(port, "/?" + urlencode({"topic": DEMO_TOPIC}), session)
        assert status == 200
        assert "organization <code>demo</code>" in page
        assert 'class="hit"' in page  # the demo organization's entries answered
        # the link is spent
        status, _, _ = console_get(port, f"{parts.path}?{parts.query}")
        assert status == 403
    finally:
        process.terminate()  # SIGTERM, as a service manager stops it
        process.wait(timeout=30)
    # the embedded PostgreSQL it started stopped with it (its pid file goes at shutdown):
    # uvicorn raises SIGTERM again after stopping, which killed the process before its
    # clean-up and left the server running
    assert process.returncode == 0
    assert not (tmp_path / "data" / "pgdata" / "postmaster.pid").exists()
