"""`grandbo mcp` against a red team's findings (issue 24, points 6 and 8-11): streams that
never close, Host and Origin checks that depend on the bind address, metrics that span
tenants, arguments coerced where the HTTP API refuses them, and stdio calls dropped at
end of input. The HTTP tests run the real command as a process over the test database."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import psutil
import pytest

from grandbo.api.auth import Keyring, mint_query_token
from grandbo.api.models import FeedbackRequest, QueryRequest
from grandbo.storage.connections import DatabaseUrls

from .conftest import Gateway
from .test_mcp_server import ENTRY, TOPIC, HttpDoor, call, door, local_server, run, seeded

__all__ = ["door"]  # the fixture, imported for the metrics test

GRANDBO = str(Path(sys.executable).with_name("grandbo"))
HTTP_COMMAND = (GRANDBO, "--provider", "fake", "mcp", "--transport", "http")
LIST_TOOLS = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})


@dataclass
class McpProcess:
    process: subprocess.Popen[str]
    connect_host: str  # the address a client dials
    port: int
    token: str

    def request(
        self,
        method: str,
        path: str,
        *,
        host: str,
        origin: str | None = None,
        body: str | None = None,
        token: str | None = None,
    ) -> tuple[int, str]:
        conn = http.client.HTTPConnection(self.connect_host, self.port, timeout=10)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host)
            conn.putheader("Authorization", f"Bearer {token or self.token}")
            conn.putheader("Accept", "application/json, text/event-stream")
            if origin is not None:
                conn.putheader("Origin", origin)
            if body is not None:
                conn.putheader("Content-Type", "application/json")
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body.encode() if body is not None else None)
            response = conn.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()


def _environment(database: DatabaseUrls, data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database.app,
        "GRANDBO_ADMIN_DATABASE_URL": database.admin,
        "GRANDBO_DATA_DIR": str(data_dir),
    }


@contextlib.contextmanager
def mcp_http(
    database: DatabaseUrls, data_dir: Path, bind: str, *extra: str
) -> Iterator[McpProcess]:
    """`grandbo mcp --transport http --host BIND --port 0`, until it says where it serves."""
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [*HTTP_COMMAND, "--host", bind, "--port", "0", *extra],
        env=_environment(database, data_dir),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    said: list[str] = []
    try:
        deadline = time.monotonic() + 60
        banner = None
        while banner is None and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 0.5)
            if ready:
                line = process.stderr.readline()
                if not line:
                    break
                said.append(line)
                if "Grandbo MCP server on http://" in line:
                    banner = line
        assert banner is not None, f"grandbo mcp did not start: {''.join(said)}"
        base = banner.split(" on ", 1)[1].split("/mcp", 1)[0]  # http://HOST:PORT
        authority = base.removeprefix("http://")
        address, port = authority.rsplit(":", 1)
        keyring = Keyring.from_json((data_dir / "keyring.json").read_text())
        token = mint_query_token(keyring.find("demo-beacon", "query"))
        connect = address.strip("[]")
        if connect in ("0.0.0.0", "::"):  # noqa: S104 - the address it was told to bind
            connect = "127.0.0.1" if connect == "0.0.0.0" else "::1"  # noqa: S104
        yield McpProcess(process, connect, int(port), token)
    finally:
        process.terminate()
        process.wait(30)


# -- 6: a GET stream in stateless mode ----------------------------------------------------


def test_get_streams_are_refused_and_leave_no_descriptors_behind(
    database: DatabaseUrls, tmp_path: Path
) -> None:
    with mcp_http(database, tmp_path, "127.0.0.1") as server:
        keyring = Keyring.from_json((tmp_path / "keyring.json").read_text())
        short_lived = mint_query_token(keyring.find("demo-beacon", "query"), ttl_s=2)
        served = psutil.Process(server.process.pid)
        assert (
            server.request("POST", "/mcp", host=f"127.0.0.1:{server.port}", body=LIST_TOOLS)[0]
            == 200
        )
        baseline = served.num_fds()
        streams = []
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(
                (
                    f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                    f"Authorization: Bearer {short_lived}\r\nAccept: text/event-stream\r\n\r\n"
                ).encode()
            )
            streams.append(sock)
        try:
            for sock in streams:
                head = sock.recv(4096).decode(errors="replace")
                assert head.startswith("HTTP/1.1 405"), head.splitlines()[:1]
                assert "allow: post" in head.lower()
            # the server closes them itself (keep-alive timeout), whatever the client does
            deadline = time.monotonic() + 2 + 8
            for sock in streams:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    while sock.recv(4096):
                        pass
                except TimeoutError:
                    pytest.fail("a GET /mcp connection was still open after the token expired")
            time.sleep(0.5)
            assert served.num_fds() <= baseline + 2
        finally:
            for sock in streams:
                sock.close()


# -- 8: Host and Origin, exactly, for every bind address and route -------------------------


@pytest.mark.parametrize("bind", ["127.0.0.2", "::ffff:127.0.0.1", "::1", "127.0.0.1"])
def test_host_and_origin_are_checked_exactly_on_every_loopback_bind(
    database: DatabaseUrls, tmp_path: Path, bind: str
) -> None:
    with mcp_http(database, tmp_path, bind) as server:
        served = f"[{server.connect_host}]" if ":" in server.connect_host else server.connect_host
        good = f"{served}:{server.port}"
        for path, method, body in (("/mcp", "POST", LIST_TOOLS), ("/metrics", "GET", None)):
            status, text = server.request(method, path, host=good, body=body)
            assert status == 200, (path, text)
            status, _ = server.request(method, path, host=good, origin=f"http://{good}", body=body)
            assert status == 200, path
            status, _ = server.request(
                method,
                path,
                host=f"localhost:{server.port}",
                origin=f"http://localhost:{server.port}",
                body=body,
            )
            assert status == 200, path
            refused = {
                "evil host": (f"evil.example:{server.port}", None),
                "evil host and origin": (f"evil.example:{server.port}", "http://evil.example"),
                "a prefix of the host": (f"{good}.evil.example", None),
                "evil origin": (good, "http://evil.example"),
                "a prefix of the origin": (good, f"http://{good}.evil.example"),
                "another port": (f"{served}:{server.port + 1}", None),
                "https origin": (good, f"https://{good}"),
            }
            for name, (host, origin) in refused.items():
                status, text = server.request(method, path, host=host, origin=origin, body=body)
                assert status in (403, 421), (bind, path, name, status)
                assert "tools" not in text, (path, name)
                assert "calls" not in text, (path, name)


def test_a_wildcard_bind_needs_the_host_names_clients_use(
    database: DatabaseUrls, tmp_path: Path
) -> None:
    refused = subprocess.run(  # noqa: S603 - our own CLI
        [*HTTP_COMMAND, "--host", "0.0.0.0", "--port", "0"],  # noqa: S104
        env=_environment(database, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0
    assert "--allowed-host" in refused.stderr
    bind = "0.0.0.0"  # noqa: S104 - the point of the test
    with mcp_http(database, tmp_path, bind, "--allowed-host", "mcp.team.internal") as server:
        port = server.port
        for path, method, body in (("/mcp", "POST", LIST_TOOLS), ("/metrics", "GET", None)):
            for host, origin in (
                (f"mcp.team.internal:{port}", f"http://mcp.team.internal:{port}"),
                ("mcp.team.internal", "https://mcp.team.internal"),  # behind a TLS proxy
                (f"127.0.0.1:{port}", None),
                (f"localhost:{port}", None),
            ):
                status, _ = server.request(method, path, host=host, origin=origin, body=body)
                assert status == 200, (path, host)
            for host, origin in (
                (f"evil.example:{port}", "http://evil.example"),
                (f"0.0.0.0:{port}", None),
                (f"mcp.team.internal:{port}.evil.example", None),
                (f"mcp.team.internal:{port}", f"http://mcp.team.internal:{port}.evil.example"),
            ):
                status, _ = server.request(method, path, host=host, origin=origin, body=body)
                assert status in (403, 421), (path, host, origin)


# -- 9: metrics of the token's tenant only -------------------------------------------------


def test_metrics_count_only_the_tokens_tenant(
    door: HttpDoor, gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    mine = mint_query_token(gateway.keys[f"{tenant}-query"])
    theirs = mint_query_token(gateway.keys[f"{other_tenant}-query"])
    for _ in range(2):
        assert not door.call(mine, "query_org_memory", {"topic": TOPIC}).is_error
    assert not door.call(theirs, "query_org_memory", {"topic": TOPIC}).is_error
    assert door.call(theirs, "criticality", {"service": "nope"}).is_error

    def metrics(token: str) -> dict[str, Any]:
        reply = httpx2.get(
            f"{door.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=5
        )
        assert reply.status_code == 200
        return dict(reply.json())

    my_counts, their_counts = metrics(mine), metrics(theirs)
    assert my_counts["query_org_memory"]["calls"] == 2
    assert my_counts["criticality"]["calls"] == 0
    assert their_counts["query_org_memory"]["calls"] == 1
    assert their_counts["criticality"]["calls"] == 1


# -- 10: arguments as strict as the HTTP API -----------------------------------------------


def test_tool_arguments_are_not_coerced(gateway: Gateway, tenant: str) -> None:
    seeded(gateway, tenant, ENTRY)
    server = local_server(gateway, tenant)
    entry = "00000000-0000-4000-8000-0000000000aa"
    refused = [
        ("query_org_memory", {"topic": TOPIC, "limit": True}, "invalid limit"),
        ("query_org_memory", {"topic": TOPIC, "limit": "3"}, "invalid limit"),
        ("query_org_memory", {"topic": TOPIC, "limit": 2.0}, "invalid limit"),
        ("query_org_memory", {"topic": TOPIC, "service": 7}, "invalid service"),
        ("query_org_memory", {"topic": TOPIC, "tenant_id": "someone"}, "invalid tenant_id"),
        ("query_org_memory", {"topic": "x " * 4001}, "invalid topic"),
        ("blast_radius", {"service": "db", "hops": True}, "invalid hops"),
        ("blast_radius", {"service": "db", "hops": "2"}, "invalid hops"),
        ("blast_radius", {"service": "db", "hops": 2.0}, "invalid hops"),
        (
            "record_feedback",
            {"entry_id": entry, "verdict": "helpful", "incident_id": "INC-1", "note": 5},
            "invalid note",
        ),
        (
            "record_feedback",
            {"entry_id": entry, "verdict": "helpful", "incident_id": "INC-1", "extra": 1},
            "invalid extra",
        ),
    ]
    for tool, arguments, message in refused:
        result = run(lambda t=tool, a=arguments: call(server, t, a))
        assert result.is_error, (tool, arguments)
        assert result.content[0].text.startswith(message), (arguments, result.content[0].text)
    accepted = run(lambda: call(server, "query_org_memory", {"topic": TOPIC, "limit": 3}))
    assert not accepted.is_error, accepted.content


def test_tool_schemas_match_the_http_apis_models(gateway: Gateway, tenant: str) -> None:
    async def listed() -> Any:
        from mcp import Client

        async with Client(local_server(gateway, tenant)) as client:
            return await client.list_tools()

    tools = {tool.name: tool.input_schema for tool in run(listed).tools}
    for tool, model in (("query_org_memory", QueryRequest), ("record_feedback", FeedbackRequest)):
        api = model.model_json_schema()["properties"]
        ours = tools[tool]["properties"]
        for field, schema in api.items():
            drop = {"title", "description", "examples"}  # the constraints, not the words
            assert {k: v for k, v in ours[field].items() if k not in drop} == {
                k: v for k, v in schema.items() if k not in drop
            }, (tool, field)


# -- 11: stdio at end of input, and lines that are not JSON-RPC ----------------------------


def test_stdio_finishes_the_last_call_and_answers_parse_errors(
    gateway: Gateway, database: DatabaseUrls, tenant: str, tmp_path: Path
) -> None:
    seeded(gateway, tenant, ENTRY)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "e2e", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "this is not json",
        {"not": "a JSON-RPC message"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "query_org_memory", "arguments": {"topic": TOPIC}},
        },
    ]
    stdin = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    finished = subprocess.run(  # noqa: S603 - our own CLI
        [GRANDBO, "--provider", "fake", "mcp", "--tenant", tenant],
        input=stdin,
        env=_environment(database, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    answers = [json.loads(line) for line in finished.stdout.splitlines()]
    errors = [answer["error"]["code"] for answer in answers if "error" in answer]
    assert errors == [-32700, -32600], answers
    assert all(answer["id"] is None for answer in answers if "error" in answer)
    (called,) = [answer for answer in answers if answer.get("id") == 2]
    assert called["result"]["isError"] is False, called
    assert called["result"]["structuredContent"]["hits"][0]["title"] == ENTRY["title"]


# -- 12: a key removed from the keyring ----------------------------------------------------


def test_a_key_removed_from_the_keyring_stops_authenticating_on_a_running_server(
    database: DatabaseUrls, tmp_path: Path
) -> None:
    """Issue 24, item 12 (the MCP half): `grandbo mcp --transport http` reads its keyring
    again whenever the file changes, so a removed key's tokens are refused at once."""
    with mcp_http(database, tmp_path, "127.0.0.1") as server:
        host = f"127.0.0.1:{server.port}"
        assert server.request("POST", "/mcp", host=host, body=LIST_TOOLS)[0] == 200
        path = tmp_path / "keyring.json"
        document = json.loads(path.read_text())
        document["keys"] = [k for k in document["keys"] if k["key_id"] != "demo-beacon"]
        path.write_text(json.dumps(document))
        assert server.request("POST", "/mcp", host=host, body=LIST_TOOLS)[0] == 401
