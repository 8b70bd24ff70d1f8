"""`grandbo mcp` driven by the MCP SDK's own client: in-process, over stdio (a real
subprocess) and over streamable HTTP, against the local store and the local runner."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from grandbo.agent.backends import RemoteBackend, StoreBackend
from grandbo.agent.http_door import bind_address, http_door_app, transport_security
from grandbo.agent.server import (
    TOOLS,
    KeyringTokenVerifier,
    ToolMetrics,
    build_server,
    fixed_tenant,
    token_tenant,
)
from grandbo.api.auth import SigningKey, mint_query_token
from grandbo.api.client import MemoryClient
from grandbo.memory.read.recall import MAX_LIMIT
from grandbo.storage.connections import DatabaseUrls
from grandbo.topology.model import service_dependencies

from .conftest import Gateway
from .readiness import READY_WITHIN_S, until_ready
from .test_recall_hook import serving, trickle

T = TypeVar("T")
CALL_TIMEOUT_S = 60.0
TOPIC = "checkout requests time out waiting for a database connection from the pool"
ENTRY = {
    "title": "PgBouncer pool exhausted on checkout",
    "summary": "Checkout requests waited for a database connection until they timed out.",
    "service": "checkout-api",
}
OTHER = {
    "title": "Checkout pool starved by a long migration",
    "summary": "A schema migration held database connections and checkout requests timed out.",
}


def run(work: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(work)


async def call(server: Any, tool: str, arguments: dict[str, Any]) -> Any:
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


def seeded(gateway: Gateway, tenant: str, *entries: dict[str, Any]) -> list[str]:
    ids = []
    for entry in entries:
        reply = gateway.admin(tenant, "POST", "/v1/admin/entries", entry)
        assert reply.status == 201, reply.body
        ids.append(reply.body["entry"]["entry_id"])
    gateway.drain()
    return ids


def local_server(gateway: Gateway, tenant: str, metrics: ToolMetrics | None = None) -> MCPServer:
    return build_server(StoreBackend(gateway.runtime), fixed_tenant(tenant), metrics=metrics)


def test_tools_are_listed_with_their_schemas_and_guidance(gateway: Gateway, tenant: str) -> None:
    async def listed() -> Any:
        async with Client(local_server(gateway, tenant)) as client:
            return await client.list_tools()

    tools = {tool.name: tool for tool in run(listed).tools}
    assert set(tools) == set(TOOLS)
    query = tools["query_org_memory"]
    schema = query.input_schema
    assert schema["required"] == ["topic"]
    assert schema["properties"]["limit"]["maximum"] == MAX_LIMIT
    assert "tenant" not in json.dumps(schema)  # nothing a caller could name it with
    scope = json.dumps(schema["properties"]["scope"])
    assert all(value in scope for value in ("blast_radius", "dependencies"))
    assert query.output_schema is not None
    assert {"hits", "metadata"} <= set(query.output_schema["properties"])
    description = query.description or ""
    assert "sentence" in description
    assert all(word in description for word in ("shared_tags", "vector_rank", "fused_score"))
    assert "not ground truth" in description
    assert tools["get_memory_entry"].input_schema["properties"]["entry_id"]["format"] == "uuid"
    assert tools["blast_radius"].input_schema["properties"]["hops"]["maximum"] == 3
    readers = [tools[name] for name in TOOLS if name != "record_feedback"]
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in readers)
    feedback = tools["record_feedback"]
    assert feedback.annotations is not None
    assert feedback.annotations.read_only_hint is False
    assert feedback.input_schema["required"] == ["entry_id", "verdict", "incident_id"]


def test_a_query_returns_the_http_apis_hits_locally_and_remotely(
    gateway: Gateway, tenant: str
) -> None:
    seeded(gateway, tenant, ENTRY, OTHER)
    over_http = gateway.query(tenant, {"topic": TOPIC, "limit": 5})
    assert over_http.status == 200
    expected = [(hit["entry_id"], hit["why"]["fused_score"]) for hit in over_http.body["hits"]]
    assert len(expected) == 2

    local = run(lambda: call(local_server(gateway, tenant), "query_org_memory", {"topic": TOPIC}))
    remote_backend = RemoteBackend(
        MemoryClient(
            f"http://{gateway.host}:{gateway.port}",
            mint_query_token(gateway.keys[f"{tenant}-query"]),
        )
    )
    remote_server = build_server(remote_backend, fixed_tenant(None))
    remote = run(lambda: call(remote_server, "query_org_memory", {"topic": TOPIC}))
    for result in (local, remote):
        assert not result.is_error, result.content
        hits = result.structured_content["hits"]
        assert [(hit["entry_id"], hit["why"]["fused_score"]) for hit in hits] == expected
        for hit in hits:  # a handful of words a model can use, the shared ones first
            assert 0 < len(hit["tags"]) <= 8, hit["tags"]
            # each a whole word of the entry's text or of the topic's shared words (no stem)
            words = set(re.findall(r"[\w-]+", f"{hit['title']} {hit['summary']}".lower()))
            words |= set(hit["why"]["shared_words"])
            assert set(hit["tags"]) <= words, (hit["tags"], words)
            assert (
                hit["tags"][: len(hit["why"]["shared_words"][:8])] == hit["why"]["shared_words"][:8]
            )
        assert hits[0]["why"]["vector_rank"] == over_http.body["hits"][0]["why"]["vector_rank"]

    entry_id = expected[0][0]
    for server in (local_server(gateway, tenant), remote_server):
        got = run(lambda s=server: call(s, "get_memory_entry", {"entry_id": entry_id}))
        assert not got.is_error
        assert got.structured_content["entry_id"] == entry_id


def test_feedback_through_the_tool_is_counted_on_later_hits(gateway: Gateway, tenant: str) -> None:
    (entry_id,) = seeded(gateway, tenant, ENTRY)
    server = local_server(gateway, tenant)
    arguments = {"entry_id": entry_id, "verdict": "helpful", "incident_id": "INC-7"}
    first = run(lambda: call(server, "record_feedback", arguments))
    assert not first.is_error, first.content
    assert first.structured_content == {"helpful": 1, "not_helpful": 0, "misleading": 0}
    again = run(lambda: call(server, "record_feedback", arguments))
    assert again.structured_content["helpful"] == 1  # the same verdict, counted once
    remote = build_server(
        RemoteBackend(
            MemoryClient(
                f"http://{gateway.host}:{gateway.port}",
                mint_query_token(gateway.keys[f"{tenant}-query"]),
            )
        ),
        fixed_tenant(None),
    )
    misleading = {**arguments, "verdict": "misleading", "note": "it was DNS"}
    assert run(lambda: call(remote, "record_feedback", misleading)).structured_content == {
        "helpful": 1,
        "not_helpful": 0,
        "misleading": 1,
    }
    hits = run(lambda: call(server, "query_org_memory", {"topic": TOPIC})).structured_content
    assert hits["hits"][0]["feedback"] == {"helpful": 1, "not_helpful": 0, "misleading": 1}
    bad_note = run(lambda: call(server, "record_feedback", {**arguments, "note": "a\x00b"}))
    assert bad_note.is_error
    assert "invalid note" in bad_note.content[0].text


def test_a_bad_topic_is_a_tool_error_the_model_can_correct(gateway: Gateway, tenant: str) -> None:
    metrics = ToolMetrics()
    server = local_server(gateway, tenant, metrics)
    for topic in ("checkout-api-slow-queries", "Checkout API Slow Queries After Deploy"):
        result = run(lambda t=topic: call(server, "query_org_memory", {"topic": t}))
        assert result.is_error
        text = result.content[0].text
        assert "invalid topic" in text
        assert "send a sentence describing what has been found" in text
    unknown_id = "00000000-0000-4000-8000-0000000000aa"
    missing = run(lambda: call(server, "get_memory_entry", {"entry_id": unknown_id}))
    assert missing.is_error
    assert "not found" in missing.content[0].text
    # arguments the SDK refuses are worded like any bad input: the field, the problem
    refused = {
        "query_org_memory": ({"topic": TOPIC, "limit": 999}, "invalid limit: Input should be"),
        "blast_radius": ({"service": "db", "hops": 9}, "invalid hops: Input should be"),
        "get_memory_entry": ({"entry_id": "nope"}, "invalid entry_id: Input should be"),
    }
    for tool, (arguments, message) in refused.items():
        result = run(lambda t=tool, a=arguments: call(server, t, a))
        assert result.is_error
        assert result.content[0].text.startswith(message), result.content[0].text
        assert "pydantic" not in result.content[0].text
    snapshot = metrics.snapshot(tenant)
    assert snapshot["query_org_memory"]["outcomes"] == {"invalid_input": 3}
    assert snapshot["get_memory_entry"]["outcomes"] == {"not_found": 1, "invalid_input": 1}


def test_remote_mode_refuses_a_bad_token_cleanly(gateway: Gateway, tenant: str) -> None:
    base = f"http://{gateway.host}:{gateway.port}"
    forged = "gbq1.nobody.9999999999." + "0" * 64
    server = build_server(RemoteBackend(MemoryClient(base, forged)), fixed_tenant(None))
    result = run(lambda: call(server, "query_org_memory", {"topic": TOPIC}))
    assert result.is_error
    assert "refused this server's token (HTTP 401)" in result.content[0].text
    down = build_server(
        RemoteBackend(MemoryClient("http://127.0.0.1:9", forged, timeout=1)), fixed_tenant(None)
    )
    unreachable = run(lambda: call(down, "query_org_memory", {"topic": TOPIC}))
    assert unreachable.is_error
    assert "unreachable" in unreachable.content[0].text
    # a server that trickles its answer is cut at the timeout, as a whole
    slow = serving(trickle)
    try:
        slow_server = build_server(
            RemoteBackend(MemoryClient(next(slow), forged, timeout=1)), fixed_tenant(None)
        )
        started = time.monotonic()
        cut = run(lambda: call(slow_server, "query_org_memory", {"topic": TOPIC}))
        assert time.monotonic() - started < 2.5
    finally:
        for _ in slow:
            pass
    assert cut.is_error
    assert "no complete answer within 1 s" in cut.content[0].text


def test_a_store_outage_reads_as_retry_later_without_the_drivers_words() -> None:
    from grandbo.agent.server import _tool_error
    from grandbo.errors import StoreUnavailableError

    outcome, error = _tool_error(
        StoreUnavailableError('connection to server on socket "/srv/pgdata/.s.PGSQL" failed')
    )
    assert outcome == "unavailable"
    assert str(error) == "Grandbo's store is unavailable; retry in a few seconds"


def test_topology_tools_answer_from_the_service_graph(gateway: Gateway, tenant: str) -> None:
    batch = service_dependencies([("web", "checkout-api"), ("checkout-api", "db")])
    body = batch.model_dump(mode="json", by_alias=True)
    reply = gateway.admin(tenant, "POST", "/v1/admin/topology", body)
    assert reply.status == 200, reply.body
    server = local_server(gateway, tenant)
    radius = run(lambda: call(server, "blast_radius", {"service": "db", "hops": 2}))
    assert [node["external_id"] for node in radius.structured_content["affected"]] == [
        "checkout-api",
        "web",
    ]
    # a sentence a model reads, the JSON beside it (never a pretty-printed dump as text)
    assert radius.content[0].text == (
        'If "db" fails, 2 node(s) within 2 hop(s) are affected: "checkout-api" (1 hop), '
        '"web" (2 hops).'
    )
    critical = run(lambda: call(server, "criticality", {"service": "db"}))
    assert critical.structured_content["score"] == pytest.approx(1.5)
    assert critical.content[0].text.startswith('"db": criticality 1.50 (')
    unknown = run(lambda: call(server, "criticality", {"service": "nope"}))
    assert unknown.is_error
    assert "no Service 'nope'" in unknown.content[0].text


# -- streamable HTTP: a multi-tenant door ---------------------------------------------------


class HttpDoor:
    def __init__(self, gateway: Gateway) -> None:
        self.metrics = ToolMetrics()
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        server = build_server(
            StoreBackend(gateway.runtime),
            token_tenant,
            metrics=self.metrics,
            verifier=KeyringTokenVerifier(gateway.runtime.keyring),
            issuer_url=self.url,
        )
        app = http_door_app(server, transport_security(bind_address("127.0.0.1"), port))
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [listener]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)

    def post(self, token: str | None) -> httpx2.Response:
        headers = {"Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        return httpx2.post(f"{self.url}/mcp", json=body, headers=headers, timeout=10)

    def call(self, token: str, tool: str, arguments: dict[str, Any]) -> Any:
        async def calling() -> Any:
            async with (
                # generous: a loaded machine answers slowly, and a late answer is no failure
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {token}"}, timeout=CALL_TIMEOUT_S
                ) as http,
                Client(streamable_http_client(f"{self.url}/mcp", http_client=http)) as client,
            ):
                return await client.call_tool(tool, arguments)

        return run(calling)


@pytest.fixture
def door(gateway: Gateway) -> Iterator[HttpDoor]:
    door = HttpDoor(gateway)
    yield door
    door.server.should_exit = True
    door.thread.join(10)


def test_the_http_door_refuses_requests_without_a_valid_query_token(
    door: HttpDoor, gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    query_key = gateway.keys[f"{tenant}-query"]
    other_key = gateway.keys[f"{other_tenant}-query"]
    forged = SigningKey(  # the tenant's key id, signed with the other tenant's secret
        key_id=query_key.key_id, tenant_id=tenant, secret=other_key.secret, roles=["query"]
    )
    refused = {
        "no token": None,
        "garbage": "not-a-token",
        "expired": mint_query_token(query_key, ttl_s=60, now=time.time() - 3600),
        "another tenant's secret": mint_query_token(forged),
        "an admin key": mint_query_token(gateway.keys[f"{tenant}-admin"]),
    }
    for name, token in refused.items():
        reply = door.post(token)
        assert reply.status_code == 401, name
        assert "tools" not in reply.text, name
    assert door.post(mint_query_token(query_key)).status_code == 200


def test_the_http_door_answers_from_the_tokens_tenant_only(
    door: HttpDoor, gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    (mine,) = seeded(gateway, tenant, ENTRY)
    (theirs,) = seeded(gateway, other_tenant, OTHER)
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    result = door.call(token, "query_org_memory", {"topic": TOPIC})
    assert not result.is_error, result.content
    assert [hit["entry_id"] for hit in result.structured_content["hits"]] == [mine]
    # a tenant named in the arguments is not an input: refused, as the API refuses it
    named = door.call(token, "query_org_memory", {"topic": TOPIC, "tenant_id": other_tenant})
    assert named.is_error
    assert named.content[0].text.startswith("invalid tenant_id:")
    stolen = door.call(token, "get_memory_entry", {"entry_id": theirs})
    assert stolen.is_error
    assert "not found" in stolen.content[0].text
    other_token = mint_query_token(gateway.keys[f"{other_tenant}-query"])
    theirs_result = door.call(other_token, "query_org_memory", {"topic": TOPIC})
    assert [hit["entry_id"] for hit in theirs_result.structured_content["hits"]] == [theirs]
    assert httpx2.get(f"{door.url}/metrics", timeout=5).status_code == 401
    counts = httpx2.get(
        f"{door.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=5
    ).json()["query_org_memory"]
    assert counts["calls"] == 2  # this tenant's; the other tenant's query is not counted
    assert counts["returned"] == 1
    assert counts["outcomes"] == {"ok": 1, "invalid_input": 1}


def test_a_token_is_one_asker_over_the_http_api_and_the_mcp_door(
    door: HttpDoor, gateway: Gateway, tenant: str
) -> None:
    """Issue 50: the retrieval log names the token's key whichever door it asked through
    (before, the MCP door logged `mcp`: one token counted as two askers of the
    organization's recalibration), and its verdicts through the tool are that key's."""
    (entry_id,) = seeded(gateway, tenant, ENTRY)
    key_id = gateway.keys[f"{tenant}-query"].key_id
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    asked = door.call(token, "query_org_memory", {"topic": TOPIC, "incident_id": "INC-DOORS"})
    assert not asked.is_error, asked.content
    assert gateway.query(tenant, {"topic": TOPIC, "incident_id": "INC-DOORS"}).status == 200
    judged = door.call(
        token,
        "record_feedback",
        {"entry_id": entry_id, "verdict": "helpful", "incident_id": "INC-DOORS"},
    )
    assert not judged.is_error, judged.content

    page = gateway.admin(tenant, "POST", "/v1/admin/retrievals", {"incident_id": "INC-DOORS"})
    assert page.status == 200, page.body
    assert [r["caller"] for r in page.body["retrievals"]] == [key_id, key_id]
    assert [v["actor"] for v in page.body["verdicts"]] == [f"query:{key_id}"]
    (tied,) = gateway.runtime.service().repository.served_verdicts(tenant, 500)
    assert (tied.source, tied.asker) == (f"query:{key_id}", key_id)


# -- stdio: the command an agent's configuration launches ----------------------------------


def test_grandbo_mcp_over_stdio_serves_the_local_store(
    gateway: Gateway, database: DatabaseUrls, tenant: str, tmp_path: Path
) -> None:
    seeded(gateway, tenant, ENTRY)
    grandbo = Path(sys.executable).with_name("grandbo")
    environment = {
        **os.environ,
        "DATABASE_URL": database.app,
        "GRANDBO_ADMIN_DATABASE_URL": database.admin,
        "GRANDBO_DATA_DIR": str(tmp_path),
    }
    parameters = StdioServerParameters(
        command=str(grandbo),
        args=["--provider", "fake", "mcp", "--tenant", tenant],
        env=environment,
    )

    async def session() -> tuple[Any, Any]:
        async with Client(parameters, read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            return listed, await client.call_tool("query_org_memory", {"topic": TOPIC})

    listed, result = run(session)
    assert {tool.name for tool in listed.tools} == set(TOOLS)
    assert not result.is_error, result.content
    assert result.structured_content["hits"][0]["title"] == ENTRY["title"]


def test_the_http_door_on_the_embedded_store_outlives_a_postgres_crash(tmp_path: Path) -> None:
    # its own data directory and process, as `grandbo mcp --transport http` runs for a team
    import signal
    import subprocess

    from grandbo.api.auth import Keyring

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "GRANDBO_"))
    }
    grandbo = [str(Path(sys.executable).with_name("grandbo")), "--data-dir", str(tmp_path)]
    pgdata = tmp_path / "pgdata"
    # its log to a file: a pipe nobody reads fills up with the crash's warnings, and a
    # server blocked writing to it answers nothing
    said = tmp_path / "mcp.log"
    with said.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603 - our own CLI
            [*grandbo, "--provider", "fake", "mcp", "--transport", "http", "--port", str(port)],
            env=environment,
            stderr=log,
        )
    try:

        def listening() -> bool | None:
            assert process.poll() is None, said.read_text(errors="replace")
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True

        until_ready(listening, "grandbo mcp listening", not_yet=(OSError,))
        door = HttpDoor.__new__(HttpDoor)
        door.url = f"http://127.0.0.1:{port}"
        keyring = Keyring.from_json((tmp_path / "keyring.json").read_text())
        token = mint_query_token(keyring.find("demo-beacon", "query"))
        assert not door.call(token, "query_org_memory", {"topic": TOPIC}).is_error
        os.kill(_postmaster(pgdata), signal.SIGKILL)
        # Then it answers again once its PostgreSQL is back: polled until it does (a
        # loaded machine takes its time), every answer meanwhile saying the store is away
        outage: list[str] = []

        def answered() -> Any | None:
            result = door.call(token, "query_org_memory", {"topic": TOPIC})
            if result.is_error:
                outage.append(result.content[0].text)
                return None
            return result

        # a call the door could not finish (its connection refused or cut while the
        # server recovers) is no answer yet; the MCP client raises it inside a task group
        until_ready(answered, "the HTTP door answering after the crash", not_yet=(Exception,))
        unavailable = "Grandbo's store is unavailable; retry in a few seconds"
        assert all(text.endswith(unavailable) for text in outage), outage
    finally:
        process.terminate()
        process.wait(READY_WITHIN_S)

    # SIGTERM stopped its PostgreSQL on the way out: waited for, not slept on
    def stopped() -> bool | None:
        try:
            os.kill(_postmaster(pgdata), 0)
        except (FileNotFoundError, ProcessLookupError):
            return True
        return None

    until_ready(stopped, "the embedded PostgreSQL stopping after grandbo mcp's SIGTERM")


def _postmaster(pgdata: Path) -> int:
    """The embedded server's process id, from its pid file (FileNotFoundError: stopped)."""
    return int((pgdata / "postmaster.pid").read_text().split()[0])
