"""Every Grandbo client names itself, as the deployed WAF requires (issue 23, item 1).

The stage's WAF runs AWS's Core rule set, whose `NoUserAgent_HEADER` blocks a request
without a User-Agent header ("Inspects for requests that are missing the HTTP
User-Agent header", rule action Block:
https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html),
and Python's http.client sends none of its own. Each client's real request is captured
here on a local socket; the local edge then refuses the same request without the header.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grandbo import __version__
from grandbo.agent.command import TOKEN_VARIABLE, _remote_backend
from grandbo.api.auth import SigningKey, mint_query_token, new_secret
from grandbo.api.client import AdminClient, GrandboHTTPError, MemoryClient, user_agent
from grandbo.api.edge import NO_USER_AGENT
from grandbo.api.recall import RecallHook

from .conftest import Gateway

KEY = SigningKey(key_id="k-capture", tenant_id="t-capture", secret=new_secret(), roles=["admin"])
TOPIC = "checkout requests time out because the database connection pool is exhausted"


@contextlib.contextmanager
def capturing() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A local HTTP server that records each request's headers and answers `{"hits": []}`."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            raw = json.dumps({"hits": [], "metadata": {}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _memory_client(base: str) -> None:
    MemoryClient(base, "gbq1.token").query_org_memory(TOPIC)


def _admin_client(base: str) -> None:
    with contextlib.suppress(Exception):  # the capture's answer is not an entry
        AdminClient(base, KEY).create_entry("Pool exhausted", "The pool ran dry.")


def _recall_hook(base: str) -> None:
    RecallHook(base, "gbq1.token", timeout_s=5).recall(TOPIC)


def _mcp_remote(base: str) -> None:
    # the MCP server's remote backend, built the way `grandbo mcp --url` builds it
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(TOKEN_VARIABLE, "gbq1.token")
        backend = _remote_backend(argparse.Namespace(url=base, timeout=5.0))
    with contextlib.suppress(Exception):  # the capture's answer is not a full query answer
        backend.query("t-capture", TOPIC, 5, None, None)


CLIENTS: dict[str, tuple[Callable[[str], None], str]] = {
    "MemoryClient": (_memory_client, "memory-client"),
    "AdminClient": (_admin_client, "admin-client"),
    "RecallHook": (_recall_hook, "recall-hook"),
    "MCP remote backend": (_mcp_remote, "mcp"),
}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_every_client_sends_its_user_agent(client: str) -> None:
    call, component = CLIENTS[client]
    with capturing() as (base, seen):
        call(base)
    assert seen, f"{client} sent no request"
    for request in seen:
        assert request.get("user-agent") == f"grandbo/{__version__} ({component})", request


def test_the_local_edge_refuses_a_request_without_a_user_agent(
    gateway: Gateway, tenant: str
) -> None:
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = json.dumps({"topic": TOPIC}).encode()
    anonymous = gateway.request("POST", "/v1/memory/query", body, headers, identified=False)
    assert anonymous.status == 403
    assert anonymous.body == NO_USER_AGENT.document()
    blank = gateway.request(
        "POST", "/v1/memory/query", body, {**headers, "User-Agent": " "}, identified=False
    )
    assert blank.status == 403
    named = gateway.request("POST", "/v1/memory/query", body, headers)
    assert named.status == 200, named.body


def test_any_user_agent_header_that_names_a_client_is_enough(gateway: Gateway, tenant: str) -> None:
    """Repeated or differently cased User-Agent headers: the WAF's rule looks for a
    missing header, so one that names a client lets the request through, and none that
    does gets the refusal."""
    import socket

    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    body = json.dumps({"topic": TOPIC}).encode()

    def status(*agents: str) -> bytes:
        lines = [
            "POST /v1/memory/query HTTP/1.1",
            "Host: local",
            f"Authorization: Bearer {token}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *agents,
        ]
        with socket.create_connection((gateway.host, gateway.port), timeout=10) as sock:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            return sock.recv(4096).split(b"\r\n", 1)[0]

    assert status("User-Agent: ", "user-agent: grandbo/x (probe)").endswith(b"200 OK")
    assert status("user-agent: grandbo/x (probe)", "User-Agent: ").endswith(b"200 OK")
    assert status("User-Agent: ", "user-agent:  ").endswith(b"403 Forbidden")


def test_a_403_from_the_edge_is_not_reported_as_a_bad_token() -> None:
    """The recall hook tells an operator the edge refused, not that the token is wrong."""

    class Forbidden(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            raw = NO_USER_AGENT.body().encode()
            self.send_response(403)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forbidden)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        recall = RecallHook(base, "gbq1.token", timeout_s=5).recall(TOPIC)
        with pytest.raises(GrandboHTTPError) as refused:
            MemoryClient(base, "gbq1.token").query_org_memory(TOPIC)
    finally:
        server.shutdown()
        server.server_close()
    assert recall.reason == "forbidden"
    assert "edge" in (recall.detail or "")
    assert refused.value.status == 403


def test_the_user_agent_names_the_version_and_component() -> None:
    assert user_agent("mcp") == f"grandbo/{__version__} (mcp)"
