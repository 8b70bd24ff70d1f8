"""Field weighting on the lexical leg (issue 13, item 2): a tag the title carries counts
TITLE_TAG_TF times; postings written before migration 0014 rank as body tags until the
backfill fills their flag, and the rebuild writes the flags the write path writes."""

from __future__ import annotations

from typing import Any

import psycopg

from grandbo.memory.service import MemoryService

from .helpers import context, entry

TOPIC = "replication lag on the orders database grew after the nightly vacuum started"


def _add(memory: MemoryService, tenant: str, title: str, summary: str) -> Any:
    return memory.record_entry(tenant, entry(title, summary), context()).entry


def _three(service: MemoryService, tenant: str) -> tuple[Any, Any]:
    """Two entries with the same tags, `replication` in one's title and the other's body."""
    summary = (
        "the orders database fell behind while the nightly vacuum held locks,"
        " so replication stalled for an hour"
    )
    titled = _add(service, tenant, "Replication stalled", summary)
    body = _add(service, tenant, "Stalled for an hour", summary)
    _add(  # an unrelated entry, so `replication` is rarer than half the lake
        service,
        tenant,
        "Banner colour wrong",
        "the marketing banner on the homepage used the old brand palette after a redesign",
    )
    return titled, body


def _scores(service: MemoryService, tenant: str) -> dict[Any, float]:
    return {c.entry_id: c.score for c in service.rank(tenant, TOPIC, use_vector=False).legs.lexical}


def _unmark(admin_conn: psycopg.Connection[Any], tenant: str) -> None:
    """What a lake written before migration 0014 looks like: no flag known."""
    admin_conn.execute(
        "UPDATE org_memory_tag_postings SET in_title = NULL WHERE tenant_id = %s", (tenant,)
    )
    admin_conn.commit()


def test_a_topic_tag_in_the_title_outranks_the_same_tag_in_the_body(
    service: MemoryService, tenant: str
) -> None:
    titled, body = _three(service, tenant)
    # the same tag set: only the field differs
    assert set(titled.index_tags) == set(body.index_tags)

    scores = _scores(service, tenant)

    assert scores[titled.entry_id] > scores[body.entry_id]


def test_unmarked_postings_rank_as_body_tags_until_the_backfill_marks_them(
    service: MemoryService, tenant: str, other_tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    titled, body = _three(service, tenant)
    _three(service, other_tenant)
    marked = _scores(service, tenant)
    _unmark(admin_conn, tenant)
    _unmark(admin_conn, other_tenant)

    unmarked = _scores(service, tenant)
    # every tag ranks as a body tag: the two entries tie, as before field weighting
    assert unmarked[titled.entry_id] == unmarked[body.entry_id]
    # a flag not filled yet is the backfill's work, not drift a repair would rebuild for
    assert service.repository.verify_projection(tenant).mismatches == []

    assert service.mark_title_tags(tenant, limit=1) == 1  # a bounded share per call
    assert service.mark_title_tags(tenant) == 2
    assert service.mark_title_tags(tenant) == 0  # nothing left

    assert _scores(service, tenant) == marked
    assert _unmarked(admin_conn, other_tenant) > 0  # one tenant only
    assert service.mark_title_tags() == 3  # every tenant
    assert _unmarked(admin_conn, other_tenant) == 0
    assert service.repository.verify_projection(other_tenant).mismatches == []


def _unmarked(admin_conn: psycopg.Connection[Any], tenant: str) -> int:
    row = admin_conn.execute(
        "SELECT count(*) FROM org_memory_tag_postings WHERE tenant_id = %s AND in_title IS NULL",
        (tenant,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_wrong_flag_is_drift(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    titled, _ = _three(service, tenant)
    admin_conn.execute(
        "UPDATE org_memory_tag_postings SET in_title = NOT in_title"
        " WHERE tenant_id = %s AND entry_id = %s AND tag = 'replic'",
        (tenant, titled.entry_id),
    )
    admin_conn.commit()

    assert service.repository.verify_projection(tenant).mismatches == [
        "tag postings differ from the replayed active entries"
    ]


def test_the_backfill_never_overwrites_a_concurrent_corrections_flags(
    service: MemoryService,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    database: Any,
    monkeypatch: Any,
) -> None:
    """The backfill reads an entry's old title; a correction moves `disk` out of the title
    and commits; the backfill's update must not give the new postings the old flags."""
    import threading

    import grandbo.memory.repository.postings as postings
    from grandbo.memory.repository import MemoryRepository
    from grandbo.storage.connections import connect

    summary = "the disk of the db host filled with rotated logs overnight again"
    old = _add(service, tenant, "Disk full on the db host", summary)
    _unmark(admin_conn, tenant)
    read, go_on = threading.Event(), threading.Event()
    real = postings.title_flags

    def paused(title: str, tags: Any) -> Any:
        if threading.current_thread().name == "backfill":
            read.set()
            go_on.wait(10)
        return real(title, tags)

    monkeypatch.setattr(postings, "title_flags", paused)
    conn = connect(database.app)
    backfill = MemoryService(MemoryRepository(conn), service.provider)
    marked: list[int] = []
    thread = threading.Thread(
        target=lambda: marked.append(backfill.mark_title_tags(tenant)), name="backfill"
    )
    thread.start()
    try:
        assert read.wait(10)  # the old title is read, nothing written yet
        service.correct_entry(
            tenant, old.entry_id, entry("Log rotation filled a volume", summary), context()
        )
    finally:
        go_on.set()
        thread.join(15)
        conn.close()

    assert marked == [0]  # the correction wrote its own flags: nothing left to fill
    flags = dict(
        admin_conn.execute(
            "SELECT tag, in_title FROM org_memory_tag_postings WHERE tenant_id = %s", (tenant,)
        ).fetchall()
    )
    assert flags["disk"] is False
    assert flags["log"] is True
    assert service.repository.verify_projection(tenant).mismatches == []


def test_overlapping_backfills_fill_each_entry_once(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any], database: Any
) -> None:
    import threading

    from grandbo.memory.repository import MemoryRepository
    from grandbo.storage.connections import connect

    words = ["disk", "queue", "cache", "replica", "lock", "timeout", "dns", "cert", "pool"]
    service.record_entries(
        tenant,
        [
            (
                entry(
                    f"{words[i % 9]} issue {i} on node{i}",
                    f"{words[(i * 7) % 9]} fault {i} seen with {words[(i * 5) % 9]}"
                    f" pressure on rack{i % 13} again",
                ),
                context(),
            )
            for i in range(300)
        ],
    )
    _unmark(admin_conn, tenant)
    results: list[object] = []
    start = threading.Barrier(3)

    def run() -> None:
        conn = connect(database.app)
        try:
            start.wait()
            results.append(
                MemoryService(MemoryRepository(conn), service.provider).mark_title_tags()
            )
        except Exception as exc:
            results.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert all(isinstance(r, int) for r in results), results
    assert sum(r for r in results if isinstance(r, int)) == 300
    assert _unmarked(admin_conn, tenant) == 0
    assert service.repository.verify_projection(tenant).mismatches == []


def test_the_rebuild_writes_the_flags_the_write_path_writes(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    _three(service, tenant)
    written = _scores(service, tenant)
    _unmark(admin_conn, tenant)

    report = service.repository.rebuild_projection(tenant)

    assert report.mismatches == []
    assert service.repository.verify_projection(tenant).mismatches == []
    assert _scores(service, tenant) == written


def test_the_health_audit_does_not_call_unfilled_flags_drift(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """Right after migration 0014 every posting's flag is unknown: a repair must not answer
    that with an exclusive rebuild of every tenant; the backfill fills it."""
    from grandbo.memory.curation.audit import audit

    _three(service, tenant)
    service.embed_pending(tenant)
    _unmark(admin_conn, tenant)

    assert "index_drift" not in {finding.check for finding in audit(service, tenant).findings}
