"""`grandbo serve`'s console reaches the gateway wherever it is bound: a specific address
(here 127.0.0.2, another loopback address) is where the console's API calls go, not
127.0.0.1 (where nothing listens then)."""

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
def test_the_console_of_a_gateway_bound_to_one_address_answers(tmp_path: Path) -> None:
    api_port, console_port = free_port("127.0.0.2"), free_port()
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
        link = login_link(process)
        parts = urlsplit(link)
        status, headers, _ = console_get(console_port, f"{parts.path}?{parts.query}")
        assert status == 303
        session = headers["set-cookie"].split(";")[0]
        status, _, page = console_get(
            console_port, "/?" + urlencode({"topic": DEMO_TOPIC}), session
        )
        assert status == 200, page
        assert 'class="hit"' in page
    finally:
        process.terminate()
        process.wait(timeout=30)
