"""Questions answered while the writer cannot be (issue 51, point 1).

A question reads only: its searches and its settings go to the reader, its admission is
counted in the answering process, and its log is written after it answers. So with the
writer gone (nothing listening where it was: what a client meets while Aurora's writer
reboots or fails over) or turned read-only (what a client meets mid-failover, connected to
a demoted writer), every question of a crowd is answered from the reader; a write is
refused with a 503 to retry, and what the log could not keep is counted.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from psycopg.conninfo import make_conninfo

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import RateLimitedError, StoreUnavailableError
from grandbo.memory.service import MemoryService
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime

from .helpers import context, entry

LESSON = entry(
    "Checkout pool exhausted by a connection leak",
    "The checkout service leaked database connections on a retry path until the pool was "
    "exhausted and requests timed out waiting for a connection.",
)
TOPIC = "checkout requests time out waiting for a database connection from the pool"
CLIENTS = 32
QUESTIONS_EACH = 4


def _dead_url(app_url: str) -> str:
    """The writer's address with nothing listening there (a port bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return make_conninfo(app_url, host="127.0.0.1", port=str(port), connect_timeout="2")


def _runtime(writer_url: str, reader_url: str, containers: int | None = 8) -> LambdaRuntime:
    return LambdaRuntime(
        LambdaEnvironment.model_validate(
            {
                "DATABASE_URL": writer_url,
                "DATABASE_READ_URL": reader_url,
                "GRANDBO_EMBEDDING_PROVIDER": "fake",
            }
        ),
        provider=FakeEmbeddingProvider(),
        containers=containers,
    )


def _crowd(runtime: LambdaRuntime, tenant: str) -> tuple[int, list[BaseException]]:
    """CLIENTS threads asking QUESTIONS_EACH questions each: how many were answered with
    the lesson first, and what failed."""
    answered = 0
    failures: list[BaseException] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        nonlocal answered
        for _ in range(QUESTIONS_EACH):
            try:
                with runtime.container(wait_s=30):
                    result = runtime.query_org_memory(tenant, TOPIC, caller=f"agent-{n}")
                ok = bool(result.hits) and result.hits[0].title == LESSON["title"]
                with lock:
                    answered += ok
            except BaseException as exc:
                with lock:
                    failures.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answered, failures


@pytest.fixture
def reader_url(database: Any) -> str:
    # the reader: the same server, read-only (a write routed there would fail)
    return make_conninfo(database.app, options="-c default_transaction_read_only=on")


@pytest.fixture
def lake(service: MemoryService, tenant: str) -> str:
    service.record_entry(tenant, LESSON, context())
    service.embed_pending(tenant)
    return tenant


@pytest.mark.parametrize("writer", ["gone", "read-only"])
def test_every_question_of_a_crowd_is_answered_from_the_reader(
    writer: str, database: Any, reader_url: str, lake: str
) -> None:
    writer_url = (
        _dead_url(database.app)
        if writer == "gone"
        else make_conninfo(database.app, options="-c default_transaction_read_only=on")
    )
    runtime = _runtime(writer_url, reader_url)
    try:
        answered, failures = _crowd(runtime, lake)
        assert failures == []
        assert answered == CLIENTS * QUESTIONS_EACH

        # a write is refused, saying to retry (the API's 503 with Retry-After)
        lesson = entry("Another lesson", LESSON["summary"])
        with runtime.container(), pytest.raises(StoreUnavailableError):
            runtime.service().record_entry(lake, lesson, context())

        # the log could not keep them: counted, never an answer failed
        runtime.retrieval_writer.flush(30)
        assert runtime.retrieval_writer.written == 0
        assert runtime.retrieval_writer.dropped == CLIENTS * QUESTIONS_EACH
    finally:
        runtime.close()


def test_the_rate_holds_without_the_writer(
    database: Any, reader_url: str, lake: str, service: MemoryService
) -> None:
    service.set_log_bounds(lake, query_rate_per_minute=3)
    runtime = _runtime(_dead_url(database.app), reader_url)
    try:
        with runtime.container():
            for _ in range(3):
                assert runtime.query_org_memory(lake, TOPIC, caller="k").hits
            with pytest.raises(RateLimitedError) as refused:
                runtime.query_org_memory(lake, TOPIC, caller="k")
            assert refused.value.retry_after_s >= 1
            # another caller keeps its own count
            assert runtime.query_org_memory(lake, TOPIC, caller="other").hits
    finally:
        runtime.close()


def test_what_the_log_could_not_write_is_counted_once_the_writer_is_back(
    database: Any, lake: str, service: MemoryService
) -> None:
    from datetime import UTC, datetime

    from grandbo.memory.curation.audit import audit
    from grandbo.memory.curation.curator import Curation
    from grandbo.memory.domain.retrieval_log import RetrievalRecord
    from grandbo.runtime.retrieval_writer import RetrievalWriter
    from grandbo.storage.connections import connect

    back = False
    gone = _dead_url(database.app)
    writer = RetrievalWriter(lambda: connect(database.app if back else gone), gather_s=0.0)
    answer = service.query_org_memory(lake, TOPIC)

    def asked() -> RetrievalRecord:
        return RetrievalRecord.of(lake, "k", None, TOPIC, answer, 1.0, datetime.now(UTC))

    try:
        for _ in range(3):  # answered while the writer is out of reach
            writer.submit(asked())
        assert writer.flush(30)
        assert writer.dropped == 3
        assert Curation(service).settings(lake).retrieval_days_logged == []

        back = True  # the writer returns: the next write files the gap with it
        writer.submit(asked())
        assert writer.flush(30)
    finally:
        writer.close()

    (today,) = Curation(service).settings(lake).retrieval_days_logged
    assert (today.logged, today.unlogged) == (1, 3)
    (finding,) = [f for f in audit(service, lake).findings if f.check == "log_unlogged"]
    assert finding.count == 3
    assert "could not be written" in finding.detail


def test_a_question_is_one_statement_on_the_reader_and_none_on_the_writer(
    database: Any, lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51, point 5: with its organization's settings read (cached for 5 minutes), a
    question costs the reader one statement (the search) and the writer nothing before
    the answer (its log is written after, on the log's own connection)."""
    import psycopg

    reader = make_conninfo(
        database.app,
        options="-c default_transaction_read_only=on",
        application_name="the-reader",
    )
    writer = make_conninfo(database.app, application_name="the-writer")
    # as in Lambda: one request at a time on one container's connections (a local
    # runner's pooled container pings its connections first, having maybe sat out a
    # restart: docs/OPERATIONS.md)
    runtime = _runtime(writer, reader, containers=None)
    sent: list[tuple[str, str]] = []
    execute = psycopg.Cursor.execute

    def counted(self: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        name = self.connection.info.parameter_status("application_name") or ""
        sent.append((name, str(query)[:60]))
        return execute(self, query, *args, **kw)

    try:
        with runtime.container():
            assert runtime.query_org_memory(lake, TOPIC, caller="k").hits  # settings read
        assert runtime.retrieval_writer.flush(30)
        monkeypatch.setattr(psycopg.Cursor, "execute", counted)
        with runtime.container():
            assert runtime.query_org_memory(lake, TOPIC, caller="k").hits
        on_reader = [q for name, q in sent if name == "the-reader"]
        on_writer = [q for name, q in sent if name == "the-writer"]
        assert len(on_reader) == 1, on_reader
        assert on_reader[0].startswith("SELECT * FROM grandbo_search(")
        assert on_writer == []
    finally:
        runtime.close()
