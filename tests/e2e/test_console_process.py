"""`grandbo console` as a process, the way a new user runs it after the README: on the
embedded store, it prints a one-time login link, the link opens a session, and the
search page answers for the demo organization through the signed admin API."""

from __future__ import annotations

import http.client
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from grandbo.local.demo import DEMO_TOPIC


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Host": f"127.0.0.1:{port}", **({"Cookie": cookie} if cookie else {})}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


@pytest.mark.skipif(os.environ.get("GRANDBO_TEST_DATABASE_URL") is not None, reason="embedded")
def test_the_console_command_opens_on_the_local_store(tmp_path: Path) -> None:
    port = _port()
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
        assert process.stdout is not None
        link = None
        deadline = time.monotonic() + 120
        while link is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line or process.poll() is None, "grandbo console exited"
            found = re.search(r"open (http://\S+/login\?token=\S+)", line)
            link = found.group(1) if found else None
        assert link is not None, "no login link printed"
        parts = urlsplit(link)
        assert parts.port == port
        status, headers, _ = _get(port, f"{parts.path}?{parts.query}")
        assert status == 303
        cookie = headers["set-cookie"]
        assert "httponly" in cookie.lower()
        assert "samesite=strict" in cookie.lower()
        session = cookie.split(";")[0]
        status, _, page = _get(port, "/?" + urlencode({"topic": DEMO_TOPIC}), session)
        assert status == 200
        assert "organization <code>demo</code>" in page
        assert 'class="hit"' in page  # the demo organization's entries answered
        # the link is spent
        status, _, _ = _get(port, f"{parts.path}?{parts.query}")
        assert status == 403
    finally:
        process.terminate()
        process.wait(timeout=30)
