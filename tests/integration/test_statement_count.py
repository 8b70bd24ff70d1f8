"""One `query_org_memory` is at most 3 statements in the server's own log (issue 33):
the search (`grandbo_search`) and the staleness check (`grandbo_staleness_rows`), each one
self-scoped statement, directly and through PgBouncer in transaction mode. Before, the
staleness check alone took two transactions of four statements (BEGIN, set_config, the
read, COMMIT)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

from .helpers import context, entry
from .test_staleness import depends, service_node
from .transaction_pooler import start_transaction_pooler

TOPIC = "checkout requests time out waiting for a free database connection from the pool"
_LOGGED = re.compile(r"\[(\d+)\].*LOG:\s+(statement|execute [^:]*):\s(.*)")


def server_log(admin: psycopg.Connection[Any]) -> Path:
    data = admin.execute("SHOW data_directory").fetchone()
    assert data is not None
    log = Path(str(data[0])) / "log"
    assert log.exists(), "the embedded server writes its log to pgdata/log"
    return log


@contextmanager
def statements_logged(database: DatabaseUrls) -> Iterator[None]:
    """New sessions of the application role log every statement, while inside."""
    with psycopg.connect(database.admin, autocommit=True) as admin:
        admin.execute("ALTER ROLE grandbo_app SET log_statement = 'all'")
        try:
            yield
        finally:
            admin.execute("ALTER ROLE grandbo_app RESET log_statement")


def statements_between(log: Path, pid: int, start: str, end: str) -> list[str]:
    lines = log.read_text(errors="replace").splitlines()
    logged = [(int(m[1]), m[3]) for line in lines if (m := _LOGGED.search(line))]
    texts = [text for who, text in logged if who == pid]
    first = next(i for i, t in enumerate(texts) if start in t)
    last = next(i for i, t in enumerate(texts) if end in t)
    return texts[first + 1 : last]


def seeded(conn: psycopg.Connection[Any], tenant: str) -> MemoryService:
    topology = TopologyService(TopologyRepository(conn))
    memory = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider(), topology=topology)
    topology.record(
        tenant,
        {
            "nodes": [service_node("checkout"), service_node("payments-db")],
            "edges": [depends("checkout", "payments-db")],
        },
        sync=True,
    )
    for n in range(4):
        memory.record_entry(
            tenant,
            entry(
                f"Checkout pool exhausted {n}",
                f"checkout requests waited for a database connection from the pool, case {n}",
                service="checkout",
            ),
            context(),
        )
    memory.embed_pending(tenant)
    return memory


def logged_for_one_query(
    conn: psycopg.Connection[Any], database: DatabaseUrls, tenant: str
) -> list[str]:
    """The statements the server logged for one query on `conn`'s backend."""
    memory = seeded(conn, tenant)
    memory.query_org_memory(tenant, TOPIC)  # the organization's settings read, then cached
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert pid is not None
    mark = uuid.uuid4().hex
    conn.execute(f"SELECT 'start-{mark}'")
    answer = memory.query_org_memory(tenant, TOPIC)
    conn.execute(f"SELECT 'end-{mark}'")
    assert answer.hits, "a real answer, with hits whose service the topology knows"
    assert {hit.service for hit in answer.hits} == {"checkout"}
    with psycopg.connect(database.admin, autocommit=True) as admin:
        return statements_between(server_log(admin), int(pid[0]), f"start-{mark}", f"end-{mark}")


def assert_two_self_scoped_calls(logged: list[str]) -> None:
    assert len(logged) <= 3, logged
    assert any("grandbo_search" in s for s in logged), logged
    assert any("grandbo_staleness_rows" in s for s in logged), logged
    assert not any(s.strip().upper() in ("BEGIN", "COMMIT") for s in logged), logged


def test_one_query_is_at_most_three_statements_in_the_servers_log(
    database: DatabaseUrls, tenant: str
) -> None:
    with statements_logged(database):
        conn = connect(database.app)
    try:
        logged = logged_for_one_query(conn, database, tenant)
    finally:
        conn.close()
    assert_two_self_scoped_calls(logged)


def test_one_query_through_pgbouncer_is_at_most_three_statements_on_its_backend(
    database: DatabaseUrls, tenant: str
) -> None:
    with statements_logged(database):
        pooler = start_transaction_pooler(database)  # its own backends: new sessions
        conn = connect(pooler.urls.app)
        conn.execute("SELECT 1")  # the pooler opens its backend now, with the setting
    try:
        logged = logged_for_one_query(conn, database, tenant)
    finally:
        conn.close()
        pooler.stop()
    assert_two_self_scoped_calls(logged)
