"""`grandbo serve`'s console reaches the gateway wherever it is bound: a specific address
(here 127.0.0.2, another loopback address) is where the console's API calls go, not
127.0.0.1 (where nothing listens then)."""

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


def _port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
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
def test_the_console_of_a_gateway_bound_to_one_address_answers(tmp_path: Path) -> None:
    api_port, console_port = _port("127.0.0.2"), _port("127.0.0.1")
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [
            *(sys.executable, "-m", "grandbo.cli", "--data-dir", str(tmp_path / "data")),
            *("--provider", "fake", "serve", "--host", "127.0.0.2", "--port", str(api_port)),
            *("--console-port", str(console_port), "--containers", "2"),
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
            assert line or process.poll() is None, "grandbo serve exited"
            found = re.search(r"(http://127\.0\.0\.1:\d+/login\?token=\S+)", line)
            link = found.group(1) if found else None
        assert link is not None, "no console link printed"
        parts = urlsplit(link)
        status, headers, _ = _get(console_port, f"{parts.path}?{parts.query}")
        assert status == 303
        session = headers["set-cookie"].split(";")[0]
        status, _, page = _get(console_port, "/?" + urlencode({"topic": DEMO_TOPIC}), session)
        assert status == 200, page
        assert 'class="hit"' in page
    finally:
        process.terminate()
        process.wait(timeout=30)
