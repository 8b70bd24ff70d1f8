"""A real writer and reader (issue 51, point 2): the embedded PostgreSQL as a primary with a
streaming standby (PostgreSQL's own replication, `grandbo.local.standby`), the query path
reading from the standby as it reads Aurora's reader endpoint.

With the writer stopped, then with the writer made read-only (what a client meets while a
writer is demoted mid-failover), 32 clients ask for CROWD_S seconds: every question is
answered from the reader, a write is refused with a 503 to retry and nothing acknowledged
is lost, the incident-closed path succeeds once the writer returns, and what the log could
not write is counted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import StoreUnavailableError
from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres
from grandbo.local.standby import caught_up, start_standby
from grandbo.memory.curation.curator import Curation
from grandbo.migrations import migrate
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime
from grandbo.storage.connections import app_url_for, connect
from tests.e2e.test_incident_closed import incident_event

from .helpers import context, entry

CLIENTS = 32
CROWD_S = 15.0
LESSON = entry(
    "Checkout pool exhausted by a connection leak",
    "The checkout service leaked database connections on a retry path until the pool was "
    "exhausted and requests timed out waiting for a connection.",
)
TOPIC = "checkout requests time out waiting for a database connection from the pool"
TENANT = "standby-org"


@dataclass
class Pair:
    primary_dir: Path
    primary: str  # admin URLs
    standby: str


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    primary_dir = tmp_path_factory.mktemp("primary")
    standby_dir = tmp_path_factory.mktemp("standby")
    primary = start_embedded_postgres(primary_dir)
    migrate(primary)
    standby = start_standby(primary, standby_dir)
    yield Pair(primary_dir, primary, standby)
    stop_embedded_postgres(standby_dir)
    stop_embedded_postgres(primary_dir)


def _runtime(pair: Pair) -> LambdaRuntime:
    return LambdaRuntime(
        LambdaEnvironment.model_validate(
            {
                "DATABASE_URL": make_conninfo(app_url_for(pair.primary), connect_timeout="2"),
                "DATABASE_READ_URL": make_conninfo(app_url_for(pair.standby), connect_timeout="2"),
                "GRANDBO_EMBEDDING_PROVIDER": "fake",
            }
        ),
        provider=FakeEmbeddingProvider(),
        containers=8,
    )


def _replicated(pair: Pair, runtime: LambdaRuntime) -> None:
    """Until the standby has replayed every write before (the lesson and the organization's
    rate: a probe that read the settings before the rate arrived would cache them, and the
    crowd would be held at the default 600 a minute), and serves the lesson."""
    caught_up(pair.primary, pair.standby)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with runtime.container():
            result = runtime.query_org_memory(TENANT, TOPIC, caller="probe")
        if result.hits and result.metadata.read_from == "reader":
            return
        time.sleep(0.2)
    raise AssertionError("the standby never served the lesson")


def _crowd(runtime: LambdaRuntime) -> tuple[int, int, list[str]]:
    """CLIENTS threads asking for CROWD_S: (answered with the lesson from the reader, asked,
    what failed)."""
    answered = asked = 0
    failures: list[str] = []
    lock = threading.Lock()
    until = time.monotonic() + CROWD_S

    def client(n: int) -> None:
        nonlocal answered, asked
        while time.monotonic() < until:
            try:
                with runtime.container(wait_s=30):
                    result = runtime.query_org_memory(TENANT, TOPIC, caller=f"agent-{n}")
                ok = (
                    bool(result.hits)
                    and result.hits[0].title == LESSON["title"]
                    and result.metadata.read_from == "reader"
                )
                with lock:
                    asked += 1
                    answered += ok
            except Exception as exc:
                with lock:
                    asked += 1
                    failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answered, asked, failures


def _write_refused(runtime: LambdaRuntime) -> None:
    lesson = entry("Another lesson of the failover", LESSON["summary"])
    with runtime.container(), pytest.raises(StoreUnavailableError):
        runtime.service().record_entry(TENANT, lesson, context())


def test_the_writer_stopped_every_question_is_answered_from_the_standby(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functions.incident_closed.handler as incident_closed

    runtime = _runtime(pair)
    try:
        with runtime.container():
            service = runtime.service()
            service.record_entry(TENANT, LESSON, context())
            service.embed_pending(TENANT)
            # the crowd asks as fast as it can: the rate is not what is measured here
            service.set_log_bounds(TENANT, query_rate_per_minute=100_000)
        _replicated(pair, runtime)
        stop_embedded_postgres(pair.primary_dir)

        answered, asked, failures = _crowd(runtime)
        assert failures == []
        assert asked > CLIENTS
        assert answered == asked
        _write_refused(runtime)

        # an incident closed meanwhile: its delivery fails (the queue retries it), and it
        # is recorded once the writer is back
        event = incident_event(TENANT, "INC-FAILOVER")
        monkeypatch.setattr(incident_closed, "runtime", lambda: runtime)
        with runtime.container(), pytest.raises(StoreUnavailableError):
            incident_closed.deliver(json.dumps(event))
        start_embedded_postgres(pair.primary_dir)
        with runtime.container():
            recorded = incident_closed.deliver(json.dumps(event))
        assert recorded["created"] >= 1

        # the log could not write the crowd's questions: counted, filed with the next write
        with runtime.container():
            runtime.query_org_memory(TENANT, TOPIC, caller="after")
        writer = runtime.retrieval_writer
        assert writer.flush(30)
        # (what was still queued when the writer came back was written then)
        assert writer.dropped > asked / 2
        with runtime.container():
            (today,) = Curation(runtime.service()).settings(TENANT).retrieval_days_logged
        assert (today.logged, today.unlogged) == (writer.written, writer.dropped)
    finally:
        runtime.close()
        install_runtime(None)
        start_embedded_postgres(pair.primary_dir)


def test_the_writer_read_only_every_question_is_answered_and_writes_are_refused(
    pair: Pair,
) -> None:
    runtime = _runtime(pair)
    admin = connect(pair.primary)
    admin.autocommit = True
    try:
        with runtime.container():
            runtime.service().record_entry(TENANT, LESSON, context())
        _replicated(pair, runtime)
        before = _entries(pair)
        admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        admin.execute("SELECT pg_reload_conf()")

        answered, asked, failures = _crowd(runtime)
        assert failures == []
        assert answered == asked
        _write_refused(runtime)
        assert _entries(pair) == before  # nothing acknowledged, nothing half-stored
    finally:
        admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
        admin.execute("SELECT pg_reload_conf()")
        admin.close()
        runtime.close()


def _entries(pair: Pair) -> int:
    with psycopg.connect(pair.primary) as conn:
        row: Any = conn.execute(
            "SELECT count(*) FROM org_memory_entries WHERE tenant_id = %s", (TENANT,)
        ).fetchone()
        return int(row[0])
