"""`rebuild` is safe at any time: writers of the tenant wait for it, nothing acknowledged is
lost, and the projection, statistics and postings verify clean afterwards."""

from __future__ import annotations

import threading
import time
from uuid import UUID

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.domain.models import EntryStatus
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from tests.integration.helpers import context, entry

WRITERS = 3
RUN_S = 2.5


def _service(database: DatabaseUrls) -> MemoryService:
    return MemoryService(MemoryRepository(connect(database.app)), FakeEmbeddingProvider())


def test_rebuilds_during_concurrent_writes_lose_nothing(
    database: DatabaseUrls, tenant: str
) -> None:
    # Given writers that create, correct and retire entries as fast as they can
    acknowledged: dict[UUID, tuple[int, EntryStatus]] = {}
    lock = threading.Lock()
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer(n: int) -> None:
        service = _service(database)
        i = 0
        try:
            while not stop.is_set():
                i += 1
                created = service.record_entry(
                    tenant,
                    entry(
                        f"Writer {n} lesson {i}",
                        f"pool {n} exhausted after deploy {i} doubled the checkout-api workers",
                    ),
                    context(),
                ).entry
                state = (created.revision, created.status)
                if i % 3 == 0:
                    corrected = service.correct_entry(
                        tenant,
                        created.entry_id,
                        entry(
                            f"Writer {n} lesson {i} v2",
                            f"retry storm {n} in deploy {i}: clients retried without any jitter",
                        ),
                        context(),
                    ).entry
                    state = (corrected.revision, corrected.status)
                if i % 5 == 0:
                    retired = service.retire_entry(
                        tenant, created.entry_id, "superseded by a runbook", context()
                    ).entry
                    state = (retired.revision, retired.status)
                with lock:
                    acknowledged[created.entry_id] = state
        except BaseException as exc:  # reported below, never swallowed
            failures.append(exc)
        finally:
            service.repository._conn.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    # When the projection is rebuilt again and again while they write
    rebuilder = _service(database)
    rebuilds = 0
    deadline = time.monotonic() + RUN_S
    while time.monotonic() < deadline:
        rebuilder.repository.rebuild_projection(tenant)
        rebuilds += 1
    stop.set()
    for thread in threads:
        thread.join()

    # Then every acknowledged write is served as acknowledged, and the projection verifies
    assert failures == []
    assert rebuilds >= 3
    assert len(acknowledged) >= 30
    for entry_id, (revision, status) in acknowledged.items():
        served = rebuilder.get_entry(tenant, entry_id)
        assert (served.revision, served.status) == (revision, status), entry_id
    assert rebuilder.repository.verify_projection(tenant).mismatches == []


def test_verify_reads_one_snapshot_while_writers_continue(
    database: DatabaseUrls, tenant: str
) -> None:
    stop = threading.Event()

    def writer() -> None:
        service = _service(database)
        i = 0
        while not stop.is_set():
            i += 1
            service.record_entry(
                tenant,
                entry(
                    f"Snapshot lesson {i}",
                    f"disk {i} filled by debug logs left on after the deploy",
                ),
                context(),
            )
        service.repository._conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    verifier = _service(database)
    try:
        reports = [verifier.repository.verify_projection(tenant) for _ in range(40)]
    finally:
        stop.set()
        thread.join()
    assert all(report.mismatches == [] for report in reports)
    assert reports[-1].entries > reports[0].entries  # the writer did run meanwhile
