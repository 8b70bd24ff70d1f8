"""Issue 35, point 4: no request path sends what pins an RDS Proxy connection.

AWS's list of what pins a PostgreSQL client connection to its backend
(https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy-pinning.html):
SET commands and set_config; PREPARE, EXECUTE, DEALLOCATE and DISCARD (and prepared
statements of the extended protocol); temporary tables, sequences and views; cursors;
LISTEN; LOAD; nextval and setval; session-level advisory locks (pg_advisory_lock,
pg_try_advisory_lock). Each of ours, against that list:

- the tenant scope's settings and lock: one `SELECT grandbo_scope(...)` (migration 0031),
  whose set_config calls are transaction-local and in the server, not sent by the client;
- the tenant and topology locks: transaction-level (pg_advisory_xact_lock*), released at
  COMMIT, not the session-level ones;
- identity columns: the server calls nextval as the column's default inside an INSERT;
  the client never sends nextval, currval or lastval;
- prepared statements: off on every connection (`prepare_threshold=None`);
- the schema owner's migrations and index builds do send set_config (their bounds): they
  are no request path, one connection per deploy or hourly run.

The test drives the request paths through the local runner (every Lambda handler, the
embed worker, the incident function) and records every statement any connection sends.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import psycopg
import pytest

from grandbo.api.auth import mint_query_token

from .conftest import Gateway
from .test_incident_closed import incident_event

PINS = {
    "a SET, RESET or prepared-statement command": re.compile(
        r"^\s*(SET|RESET|PREPARE|EXECUTE|DEALLOCATE|DISCARD|LISTEN|LOAD|DECLARE)\b", re.I
    ),
    "set_config": re.compile(r"\bset_config\s*\(", re.I),
    "a sequence function": re.compile(r"\b(nextval|setval|currval|lastval)\s*\(", re.I),
    "a session-level advisory lock": re.compile(r"\bpg_(try_)?advisory_lock(_shared)?\s*\(", re.I),
    "a temporary object": re.compile(r"\bCREATE\s+(TEMP|TEMPORARY)\b", re.I),
}


class Sent:
    """Every statement the client sends, and whether its connection prepares any."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.preparing: list[object] = []


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    seen = Sent()
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def _record(cur: psycopg.Cursor[Any], query: Any) -> None:
        text = query if isinstance(query, str) else getattr(query, "as_string", None)
        seen.statements.append(text(cur) if callable(text) else str(text or query))
        if cur.connection.prepare_threshold is not None:
            seen.preparing.append(cur.connection)

    def recorded_execute(cur: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        _record(cur, query)
        return execute(cur, query, *args, **kw)

    def recorded_many(cur: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        _record(cur, query)
        return executemany(cur, query, *args, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", recorded_execute)
    monkeypatch.setattr(psycopg.Cursor, "executemany", recorded_many)
    return seen


def _request_paths(gateway: Gateway, tenant: str) -> None:
    """What a day of an organization sends: incidents, queries, verdicts, curation."""
    assert gateway.publish(incident_event(tenant)).status == 200
    gateway.drain()  # the embed worker
    answer = gateway.query(tenant, {"topic": "payments database ran out of connections"})
    assert answer.status == 200, answer.body
    hit = answer.body["hits"][0]["entry_id"]
    verdict = {"verdict": "helpful", "incident_id": "INC-9"}
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    reply = gateway.request(  # the query route's feedback, with a query token
        "POST",
        f"/v1/memory/entries/{hit}/feedback",
        json.dumps(verdict).encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert reply.status in (200, 201), reply.body
    entry = {
        "title": "Redis evictions under memory pressure",
        "summary": "Redis evicted session keys once maxmemory was reached during the sale.",
        "service": "sessions",
    }
    created = gateway.admin(tenant, "POST", "/v1/admin/entries", entry)
    assert created.status == 201, created.body
    new = created.body["entry"]["entry_id"]
    other = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/entries",
        {**entry, "title": "Redis maxmemory reached", "summary": entry["summary"] + " Again."},
    ).body["entry"]["entry_id"]
    gateway.drain()
    for method, path, body in (
        ("GET", f"/v1/admin/entries/{new}", None),
        ("POST", f"/v1/admin/entries/{new}/corrections", {"summary": entry["summary"] + " Ok."}),
        ("GET", f"/v1/admin/entries/{new}/history", None),
        ("POST", "/v1/admin/query", {"topic": "redis evicted session keys at maxmemory"}),
        (
            "POST",
            "/v1/admin/explanation",
            {"topic": "redis evicted session keys at maxmemory", "entry_id": new},
        ),
        ("POST", "/v1/admin/catalog", {"limit": 5}),
        ("GET", "/v1/admin/duplicates", None),
        ("POST", f"/v1/admin/entries/{other}/merge", {"into": new}),
        ("POST", f"/v1/admin/entries/{new}/retirement", {"reason": "superseded"}),
        ("POST", f"/v1/admin/entries/{hit}/redaction", {"reason": "credential pasted"}),
        ("GET", "/v1/admin/health", None),
        ("GET", "/v1/admin/review", None),
        ("GET", "/v1/admin/growth", None),
        ("GET", "/v1/admin/settings", None),
        ("POST", "/v1/admin/export", {}),
        (
            "POST",
            "/v1/admin/topology",
            {
                "namespace": "topology",
                "nodes": [
                    {"node_type": "Service", "external_id": n} for n in ("payments", "checkout")
                ],
                "edges": [
                    {
                        "source": {"node_type": "Service", "external_id": "checkout"},
                        "edge_type": "DEPENDS_ON",
                        "target": {"node_type": "Service", "external_id": "payments"},
                    }
                ],
                "sync": True,
            },
        ),
        ("POST", "/v1/admin/topology/blast-radius", {"type": "Service", "id": "payments"}),
    ):
        reply = gateway.admin(tenant, method, path, body)
        assert reply.status < 300, (path, reply.status, reply.body)
    assert gateway.door("/local/backfill", b"{}").status == 200
    gateway.drain()


def test_no_request_path_sends_what_pins_a_proxy_connection(
    gateway: Gateway, tenant: str, sent: Sent
) -> None:
    _request_paths(gateway, tenant)
    assert len(sent.statements) > 100  # the recorder saw the paths' statements
    assert any("grandbo_scope(" in s for s in sent.statements)
    assert any("grandbo_search(" in s for s in sent.statements)
    pinning = [
        (why, statement[:120])
        for statement in sent.statements
        for why, pattern in PINS.items()
        if pattern.search(statement)
    ]
    assert pinning == []
    assert sent.preparing == []


def test_the_recorder_would_see_what_pins(gateway: Gateway, sent: Sent) -> None:
    """The patterns match what the page lists (a check that could fail)."""
    with psycopg.connect(gateway.runtime.environment.database_url or "") as conn:
        conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (uuid.uuid4().hex,))
        conn.execute("SET lock_timeout = '1s'")
        conn.execute("SELECT pg_advisory_lock(1), pg_advisory_unlock(1)")
    found = {why for s in sent.statements for why, pattern in PINS.items() if pattern.search(s)}
    assert found == {
        "set_config",
        "a SET, RESET or prepared-statement command",
        "a session-level advisory lock",
    }
