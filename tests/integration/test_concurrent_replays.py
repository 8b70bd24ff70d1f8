"""The same correction or retirement delivered twice at once is one write and one replay,
never a 409 (issue 11, item 7): the "already applied?" check runs again under the lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.domain.models import WriteOutcome
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from tests.integration.helpers import context, entry


def _twice_at_once(
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    entry_id: Any,
    write: Callable[[MemoryService], WriteOutcome],
) -> list[WriteOutcome]:
    """Run `write` from two connections that both pass the pre-check, then meet at the lock."""
    services = [
        MemoryService(MemoryRepository(connect(database.app)), FakeEmbeddingProvider())
        for _ in range(2)
    ]
    started = threading.Barrier(3)

    def run(service: MemoryService) -> WriteOutcome:
        started.wait()
        return write(service)

    # hold the entry's row so both deliveries queue on it before either can apply
    with ThreadPoolExecutor(max_workers=2) as pool:
        with admin_conn.transaction():
            admin_conn.execute(
                "SELECT 1 FROM org_memory_entries WHERE entry_id = %s FOR UPDATE", (entry_id,)
            )
            futures = [pool.submit(run, service) for service in services]
            started.wait()
            time.sleep(0.3)  # both are now waiting for the row; the commit releases it
        outcomes = [future.result(timeout=30) for future in futures]
    for service in services:
        service.repository._conn.close()
    return outcomes


@pytest.mark.parametrize("operation", ["correct", "retire"])
def test_a_duplicate_delivered_concurrently_replays_the_first(
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    service: MemoryService,
    tenant: str,
    operation: str,
) -> None:
    created = service.record_entry(
        tenant,
        entry(
            "Queue backlog",
            "consumers stalled on a poison message until the backlog was an hour deep",
        ),
        context(),
    ).entry
    key = context(f"{operation}-once")

    def write(svc: MemoryService) -> WriteOutcome:
        if operation == "correct":
            return svc.correct_entry(
                tenant,
                created.entry_id,
                entry(
                    "Queue backlog",
                    "a poison message stalled every consumer until it went to the dead letters",
                ),
                key,
                expected_revision=1,
            )
        return svc.retire_entry(tenant, created.entry_id, "merged into the runbook", key)

    outcomes = _twice_at_once(database, admin_conn, created.entry_id, write)

    assert sorted(o.applied for o in outcomes) == [False, True]
    assert outcomes[0].entry == outcomes[1].entry
    events = admin_conn.execute(
        "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert events == (2,)  # the creation and one correction or retirement
