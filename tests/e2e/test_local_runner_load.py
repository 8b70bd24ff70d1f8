"""The local runner under a crowd and under faults (issue 11, items 11 and 13): requests are
served concurrently, a stalled or malformed connection blocks no one, and a request that
leaves its connection inside a transaction cannot wedge the ones after it."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grandbo.api.auth import mint_query_token

from .conftest import Gateway

TOPIC = "the checkout service cannot get a database connection after the afternoon deploy"


def _query(gateway: Gateway, tenant: str) -> int:
    return gateway.query(tenant, {"topic": TOPIC}).status


def test_a_stalled_client_blocks_no_one(gateway: Gateway, tenant: str) -> None:
    # Given clients that hold connections open: a partial header, an idle socket, a short body
    stalled = []
    for opening in (
        b"POST /v1/memory/query HTTP/1.1\r\nHost: x\r\n",
        b"",
        b'POST /v1/admin/entries HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"ti',
    ):
        sock = socket.create_connection((gateway.host, gateway.port))
        sock.sendall(opening)
        stalled.append(sock)
    try:
        # When others query meanwhile, then they are answered at once
        started = time.monotonic()
        assert [_query(gateway, tenant) for _ in range(5)] == [200] * 5
        assert time.monotonic() - started < 5
    finally:
        for sock in stalled:
            sock.close()


def test_a_bad_content_length_gets_an_answer(gateway: Gateway) -> None:
    with socket.create_connection((gateway.host, gateway.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/memory/query HTTP/1.1\r\nContent-Length: abc\r\n\r\n")
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.0 400")


def test_a_crowd_of_32_clients_gets_no_error_and_no_reset(gateway: Gateway, tenant: str) -> None:
    def client(_: int) -> list[Any]:
        return [_query(gateway, tenant) for _ in range(4)]

    with ThreadPoolExecutor(max_workers=32) as pool:
        statuses = [s for batch in pool.map(client, range(32)) for s in batch]
    assert statuses == [200] * 128


def test_a_request_that_leaves_its_transaction_open_wedges_nothing(
    gateway: Gateway, tenant: str
) -> None:
    # Given an entry, and a "request" that dies holding its row inside an open transaction
    created = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/entries",
        {
            "title": "Cron overlap",
            "summary": "Two cron runs overlapped and doubled the load on the reports database.",
        },
    )
    entry_id = created.body["entry"]["entry_id"]
    runtime = gateway.runtime
    with runtime.container():
        conn = runtime.connection()
        conn.execute("BEGIN")
        conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        conn.execute("SELECT 1 FROM org_memory_entries WHERE entry_id = %s FOR UPDATE", (entry_id,))
    # When the entry is corrected and queried afterwards, then nothing waits on that lock
    started = time.monotonic()
    corrected = gateway.admin(
        tenant,
        "POST",
        f"/v1/admin/entries/{entry_id}/corrections",
        {
            "title": "Cron overlap",
            "summary": "Two cron runs overlapped; the second doubled load on the reports database.",
        },
    )
    assert corrected.status == 201, corrected.body
    assert time.monotonic() - started < 5
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    reply = gateway.request(
        "GET", f"/v1/memory/entries/{entry_id}", headers={"Authorization": f"Bearer {token}"}
    )
    assert json.dumps(reply.body).count("second doubled load") == 1
