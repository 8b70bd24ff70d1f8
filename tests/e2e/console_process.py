"""What the tests that run `grandbo console` or `grandbo serve` as a process share: a free
port, a plain GET to the console as a browser names it, and the login link it prints."""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import time

LOGIN_LINK = re.compile(r"(http://127\.0\.0\.1:\d+/login\?token=\S+)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def console_get(port: int, path: str, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    """A GET to the console on 127.0.0.1:`port`, with its Host, and the session cookie."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Host": f"127.0.0.1:{port}", **({"Cookie": cookie} if cookie else {})}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


def login_link(process: subprocess.Popen[str], within_s: float = 120) -> str:
    """The one-time login link the process prints on its standard output."""
    assert process.stdout is not None
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        assert line or process.poll() is None, "the process exited"
        found = LOGIN_LINK.search(line)
        if found:
            return found.group(1)
    raise AssertionError("no login link printed")
