"""A console on a throwaway store, and Debian's Chromium driven by Playwright's client.

The console signs with one organization's admin key against the local gateway (the
deployed edge's checks, then the admin Lambda's handler) on the test database; the
browser is /usr/bin/chromium (`make test` installs Debian's package as root; nothing
downloads a browser). Each test gets a fresh browser context (no cookies) and fails on
any JavaScript error or Content-Security-Policy violation a page reports.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from grandbo.api.auth import KeyringFile
from grandbo.console.app import create_console
from grandbo.console.backend import ConsoleBackend
from grandbo.console.security import ConsoleDoors
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.runtime.lambda_container import install_runtime
from grandbo.storage.connections import DatabaseUrls

from ..e2e.conftest import Gateway, start_gateway

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# as the machine's notes start it: without the background-networking flags Chromium
# keeps dialling Google's hosts, which a closed network refuses
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = os.environ.get("GRANDBO_CONSOLE_SCREENSHOTS")  # docs/console when refreshed


@dataclass
class ConsoleServer:
    url: str
    doors: ConsoleDoors
    gateway: Gateway
    tenant: str
    other_tenant: str

    def api(self, method: str, path: str, payload: Any = None, *, tenant: str | None = None):  # type: ignore[no-untyped-def]
        """The admin API's own answer, as the organization (or another) sees it."""
        return self.gateway.admin(tenant or self.tenant, method, path, payload)

    def create(self, entry: dict[str, Any], *, tenant: str | None = None) -> dict[str, Any]:
        reply = self.api("POST", "/v1/admin/entries", entry, tenant=tenant)
        assert reply.status == 201, reply.body
        return dict(reply.body["entry"])


# per module, not per session: Playwright's sync client runs an asyncio loop in the main
# thread while it is open, and every later asyncio.run (the MCP tests) would fail
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            "the console's browser tests need Debian's Chromium: apt-get install chromium "
            "(make test installs it when run as root)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider()


@pytest.fixture
def keyring_file(tmp_path: Path) -> Path:
    """The keyring the console's gateway and its doors read (people are added to it)."""
    return tmp_path / "keyring.json"


@pytest.fixture
def console(
    database: DatabaseUrls,
    tenant: str,
    other_tenant: str,
    provider: FakeEmbeddingProvider,
    keyring_file: Path,
) -> Iterator[ConsoleServer]:
    gateway, api_server = start_gateway(
        database, (tenant, other_tenant), provider, keyring_file=keyring_file
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    doors = ConsoleDoors(
        {f"127.0.0.1:{port}", f"localhost:{port}"},
        keyring=KeyringFile(keyring_file).current,
        tenant_id=tenant,
    )
    backend = ConsoleBackend(
        f"http://{gateway.host}:{gateway.port}", gateway.keys[f"{tenant}-admin"]
    )
    server = uvicorn.Server(
        uvicorn.Config(create_console(backend, doors), log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start"
        time.sleep(0.02)
    yield ConsoleServer(f"http://127.0.0.1:{port}", doors, gateway, tenant, other_tenant)
    server.should_exit = True
    thread.join(10)
    api_server.shutdown()
    api_server.server_close()
    gateway.runtime.close()
    install_runtime(None)


def sign_in(page: Page, link: str) -> None:
    """Follow a person's sign-in link and confirm it, as a person does: the link itself
    only asks "sign in as ...?"."""
    page.goto(link)
    page.click("#confirm-sign-in button[type=submit]")
    page.wait_for_load_state()


@dataclass
class Tab:
    """One browser tab with a session, and what its pages reported."""

    page: Page
    context: BrowserContext
    console: ConsoleServer
    problems: list[str]

    def open(self, path: str) -> Page:
        response = self.page.goto(self.console.url + path)
        assert response is not None
        return self.page

    def shot(self, name: str, tmp_path: Path) -> Path:
        """A full-page screenshot (into docs/console when GRANDBO_CONSOLE_SCREENSHOTS says)."""
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{name}.png"
        self.page.screenshot(path=str(target), full_page=True)
        assert target.stat().st_size > 1000
        return target


@pytest.fixture
def tab(browser: Browser, console: ConsoleServer) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}")
            if message.type == "error"
            else None
        ),
    )
    page.on(
        "response",
        lambda response: (
            problems.append(f"{response.status} {response.request.method} {response.url}")
            if response.status >= 400
            else None
        ),
    )
    page.on(
        "dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss())
    )
    token = console.doors.login_token
    page.goto(f"{console.url}/login?token={token}")
    assert page.url == console.url + "/"
    yield Tab(page, context, console, problems)
    context.close()
    # a refused request's 4xx is reported by Chromium as a console error: tests that
    # provoke one clear it themselves; anything else is a broken page
    assert problems == []
