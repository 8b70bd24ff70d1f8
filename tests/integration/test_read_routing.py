"""Reads scale out (issue 16, item 4): with a reader configured, a query's searches run on
the reader connection and every write on the writer; without one, nothing changes; with
the reader unreachable, queries are answered from the writer."""

from __future__ import annotations

import socket
import time
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository import MemoryRepository
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime
from grandbo.storage.connections import DatabaseUrls

from .helpers import context, entry

LESSON = entry(
    "Checkout pool exhausted by a connection leak",
    "The checkout service leaked database connections on a retry path until the pool was "
    "exhausted and requests timed out waiting for a connection.",
)
TOPIC = "checkout requests time out waiting for a database connection from the pool"


def runtime_with(database: DatabaseUrls, **environment: str) -> LambdaRuntime:
    return LambdaRuntime(
        LambdaEnvironment.model_validate(
            {"DATABASE_URL": database.app, "GRANDBO_EMBEDDING_PROVIDER": "fake", **environment}
        ),
        provider=FakeEmbeddingProvider(duplicate_distance=0.05),
    )


def last_statement(admin_conn: psycopg.Connection[Any], application_name: str) -> str:
    row = admin_conn.execute(
        "SELECT query FROM pg_stat_activity WHERE application_name = %s", (application_name,)
    ).fetchone()
    assert row is not None, f"no connection named {application_name}"
    return str(row[0])


def test_a_query_searches_the_reader_and_writes_go_to_the_writer(
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the "reader": the same server, but read-only, so a write routed there would fail
    reader_url = make_conninfo(
        database.app,
        options="-c default_transaction_read_only=on",
        application_name="grandbo-test-reader",
    )
    runtime = runtime_with(database, DATABASE_READ_URL=reader_url)
    try:
        service = runtime.service()
        assert service.reader is not service.repository
        created = service.record_entry(tenant, LESSON, context()).entry
        service.embed_pending(tenant)
        searched: list[str] = []
        search = MemoryRepository.search

        def observed(self: MemoryRepository, *args: Any, **kw: Any) -> Any:
            searched.append(self._conn.info.parameter_status("application_name") or "")
            return search(self, *args, **kw)

        monkeypatch.setattr(MemoryRepository, "search", observed)
        [hit] = service.query_org_memory(tenant, TOPIC).hits
        assert hit.entry_id == created.entry_id
        assert searched == ["grandbo-test-reader"]  # read-only there: the search wrote nothing
        # one statement there (grandbo_search, issue 28), read-only
        assert last_statement(admin_conn, "grandbo-test-reader").startswith(
            "SELECT * FROM grandbo_search("
        )
        # the query path's write (feedback) goes to the writer, and succeeds
        assert service.record_feedback(
            tenant, created.entry_id, {"verdict": "helpful", "incident_id": "INC-1"}, context()
        ).applied
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            service.reader.record_feedback(  # the reader refuses any write
                tenant,
                created.entry_id,
                service._parse(
                    __import__("grandbo.memory.models").memory.models.Feedback,
                    {"verdict": "helpful", "incident_id": "INC-2"},
                ),
                context(),
            )
    finally:
        runtime.close()


def test_without_a_reader_every_statement_goes_to_the_one_database(
    database: DatabaseUrls, tenant: str
) -> None:
    runtime = runtime_with(database)
    try:
        service = runtime.service()
        assert not runtime.reads_scale_out
        assert service.reader is service.repository
    finally:
        runtime.close()


def test_an_unreachable_reader_leaves_queries_to_the_writer(
    database: DatabaseUrls, tenant: str
) -> None:
    unreachable = make_conninfo(database.app, host="127.0.0.1", port="9", connect_timeout="2")
    runtime = runtime_with(database, DATABASE_READ_URL=unreachable)
    try:
        service = runtime.service()
        assert service.reader._conn is service.repository._conn  # the writer's
        created = service.record_entry(tenant, LESSON, context()).entry
        service.embed_pending(tenant)
        assert [h.entry_id for h in service.query_org_memory(tenant, TOPIC).hits] == [
            created.entry_id
        ]
    finally:
        runtime.close()


def test_a_reader_that_never_answers_costs_one_connect_timeout_then_is_skipped(
    database: DatabaseUrls, tenant: str
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never says a word
    port = silent.getsockname()[1]
    reader_url = make_conninfo(database.app, host="127.0.0.1", port=str(port), connect_timeout="1")
    runtime = runtime_with(database, DATABASE_READ_URL=reader_url)
    try:
        service = runtime.service()
        created = service.record_entry(tenant, LESSON, context()).entry
        service.embed_pending(tenant)
        # routes that never search never wait on the reader
        started = time.monotonic()
        assert service.get_entry(tenant, created.entry_id).entry_id == created.entry_id
        assert service.record_feedback(
            tenant, created.entry_id, {"verdict": "helpful", "incident_id": "INC-1"}, context()
        ).applied
        assert time.monotonic() - started < 0.5
        # the first query waits out the connect timeout, then the writer answers
        started = time.monotonic()
        assert service.query_org_memory(tenant, TOPIC).hits[0].entry_id == created.entry_id
        assert time.monotonic() - started < 3.0
        # and the next ones skip the reader while it is down
        started = time.monotonic()
        for _ in range(3):
            assert service.query_org_memory(tenant, TOPIC).hits
        assert time.monotonic() - started < 1.0
    finally:
        runtime.close()
        silent.close()


def test_the_reader_url_from_the_secret_has_a_connect_timeout() -> None:
    from grandbo.runtime.lambda_container import database_url_from_secret

    secret = '{"host": "h", "port": 5432, "username": "u", "password": "p"}'
    assert "connect_timeout=2" in database_url_from_secret(secret, "r", connect_timeout_s=2)
    assert "connect_timeout" not in database_url_from_secret(secret, "w")
