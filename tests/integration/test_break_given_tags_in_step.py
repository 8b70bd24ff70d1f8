"""Commit a3270fd (migration 0043's trigger, the tenant scope's `_EVERY_SCOPE` and
`_ahead_of_migration`, `spells_back` and `ProjectionRebuild._spelled_as_kept`), attacked:
today's writers and the pooler against the trigger, writers of other versions (before
0041, and 0041-0042 code that writes `given_tags` but does not state the setting), the
backfill racing a legacy writer, UndefinedColumn errors that are bugs, hostile spellings.

What holds is a plain test; each defect found is a strict xfail saying what is wrong."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import StoreUnavailableError
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage import tenant_scope
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.text.tags import spells_back, tags_for

from .helpers import context, database_at, entry
from .test_break_tags_as_written import SUMMARY, TITLE, _legacy_event

TRIGGER = "org_memory_entries_given_tags_in_step"


def _given(admin_conn: psycopg.Connection[Any], tenant: str, entry_id: uuid.UUID) -> Any:
    """The row's `given_tags` as stored (None: NULL, the backfill's work)."""
    row = admin_conn.execute(
        "SELECT given_tags FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s",
        (tenant, entry_id),
    ).fetchone()
    admin_conn.commit()
    assert row is not None
    return row[0]


def _old_writer_corrects(
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    entry_id: uuid.UUID,
    tags: list[str],
    revision: int,
    *,
    title: str = TITLE,
    summary: str = SUMMARY,
) -> None:
    """A correction as code from before migration 0041 wrote it: an event of stems only
    and an UPDATE of the row's text and stems (no `given_tags`, no setting stated), in
    the tenant's shared lock as its scope took it."""
    _legacy_event(
        admin_conn,
        tenant,
        tags,
        title=title,
        summary=summary,
        entry_id=entry_id,
        event_type="entry_corrected",
        revision=revision,
    )
    with admin_conn.transaction():
        admin_conn.execute(
            "SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))",
            (f"grandbo.tenant:{tenant}",),
        )
        admin_conn.execute(
            "UPDATE org_memory_entries SET title = %s, summary = %s, tags = %s, revision = %s,"
            " updated_at = (SELECT recorded_at FROM org_memory_events WHERE tenant_id = %s"
            "   AND entry_id = %s AND revision = %s)"
            " WHERE tenant_id = %s AND entry_id = %s",
            (
                title,
                summary,
                tags_for([title, summary, ""], tags),
                revision,
                tenant,
                entry_id,
                revision,
                tenant,
                entry_id,
            ),
        )
    admin_conn.commit()


def _entry_mismatches(service: MemoryService, tenant: str) -> list[str]:
    """The verification's entry mismatches (a simulated old writer rewrote the row alone,
    not its postings and statistics, which the verification compares apart)."""
    mismatches = service.repository.verify_projection(tenant).mismatches
    return [m for m in mismatches if m.startswith("entry ")]


# ---------------------------------------------------------------- the trigger: what holds


def test_the_trigger_is_on_every_partition_and_keys_on_the_setting_and_the_stems(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    partitions = admin_conn.execute(
        "SELECT count(*) FROM pg_inherits i JOIN pg_trigger t ON t.tgrelid = i.inhrelid"
        " WHERE i.inhparent = 'org_memory_entries'::regclass AND t.tgname = %s",
        (TRIGGER,),
    ).fetchone()
    every = admin_conn.execute(
        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'org_memory_entries'::regclass"
    ).fetchone()
    admin_conn.commit()
    assert partitions == every
    assert every == (16,)
    written = service.record_entry(
        tenant, entry(TITLE, SUMMARY, tags=["Redis", "service-discovery"]), context()
    ).entry
    row = (tenant, written.entry_id)
    # the text alone, or the same stems again, leave the tags as written
    admin_conn.execute(
        "UPDATE org_memory_entries SET title = title || '!' WHERE tenant_id = %s AND entry_id = %s",
        row,
    )
    admin_conn.execute(
        "UPDATE org_memory_entries SET tags = tags WHERE tenant_id = %s AND entry_id = %s", row
    )
    admin_conn.commit()
    assert _given(admin_conn, tenant, written.entry_id) == ["Redis", "service-discovery"]
    # stems rewritten by a writer saying it writes them: kept; by any other: emptied
    with admin_conn.transaction():
        admin_conn.execute("SELECT set_config('grandbo.writes_given_tags', 'on', true)")
        admin_conn.execute(
            "UPDATE org_memory_entries SET tags = tags || '{zz}'"
            " WHERE tenant_id = %s AND entry_id = %s",
            row,
        )
    assert _given(admin_conn, tenant, written.entry_id) == ["Redis", "service-discovery"]
    for value in ("off", "ON", " on", ""):
        with admin_conn.transaction():
            admin_conn.execute("SELECT set_config('grandbo.writes_given_tags', %s, true)", (value,))
            admin_conn.execute(
                "UPDATE org_memory_entries SET tags = tags || '{yy}'"
                " WHERE tenant_id = %s AND entry_id = %s",
                row,
            )
        assert _given(admin_conn, tenant, written.entry_id) is None, value
        admin_conn.execute(
            "UPDATE org_memory_entries SET given_tags = '{Redis}'"
            " WHERE tenant_id = %s AND entry_id = %s",
            row,
        )
        admin_conn.commit()


def test_todays_writes_keep_the_tags_as_written_an_admin_gave(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    given = ["Redis", "service-discovery"]
    written = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=given), context()).entry
    other = service.record_entry(
        tenant,
        entry(
            "Zookeeper sessions expired",
            "Zookeeper expired client sessions when the ensemble was overloaded by watches.",
            tags=["ZK"],
        ),
        context(),
    ).entry
    # a correction of the text alone (its stems change) names no tags: they stay
    service.correct_entry(
        tenant, written.entry_id, {"summary": SUMMARY + " Memcached replaced it."}, context()
    )
    assert _given(admin_conn, tenant, written.entry_id) == given
    service.correct_entry(tenant, written.entry_id, {"title": "Registry lost nodes"}, context())
    assert service.get_entry(tenant, written.entry_id).tags == given
    service.record_feedback(
        tenant, written.entry_id, {"verdict": "helpful", "incident_id": "INC-1"}, context()
    )
    service.promote_entry(tenant, written.entry_id, context())
    service.retire_entry(tenant, other.entry_id, "replaced", context())
    service.redact_entry(tenant, other.entry_id, "a customer's name", context())
    service.repository.rebuild_projection(tenant)
    assert _given(admin_conn, tenant, written.entry_id) == given
    assert service.fill_given_tags(tenant) == 0
    assert service.repository.verify_projection(tenant).mismatches == []
    # and a correction naming them writes them, stems and all, in the same statement
    service.correct_entry(tenant, written.entry_id, {"tags": ["Etcd"]}, context())
    assert _given(admin_conn, tenant, written.entry_id) == ["Etcd"]


@pytest.fixture
def pooled_pair(pooled_database: DatabaseUrls) -> Iterator[tuple[psycopg.Connection[Any], ...]]:
    first, second = connect(pooled_database.app), connect(pooled_database.app)
    yield first, second
    first.close()
    second.close()


def test_through_the_pooler_the_setting_reaches_the_write_and_never_the_next_client(
    pooled_pair: tuple[psycopg.Connection[Any], ...],
    tenant: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    first, second = pooled_pair
    pooled = MemoryService(MemoryRepository(first), FakeEmbeddingProvider())
    written = pooled.record_entry(tenant, entry(TITLE, SUMMARY, tags=["Redis"]), context()).entry
    pooled.correct_entry(tenant, written.entry_id, {"tags": ["Redis", "Etcd"]}, context())
    assert _given(admin_conn, tenant, written.entry_id) == ["Redis", "Etcd"]
    # the next client on the same backend states nothing: its rewrite of the stems empties
    assert (
        first.execute("SELECT pg_backend_pid()").fetchone()
        == second.execute("SELECT pg_backend_pid()").fetchone()
    )
    assert second.execute(
        "SELECT coalesce(current_setting('grandbo.writes_given_tags', true), '')"
    ).fetchone() == ("",)
    with second.transaction():
        second.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        second.execute(
            "UPDATE org_memory_entries SET tags = tags || '{zz}'"
            " WHERE tenant_id = %s AND entry_id = %s",
            (tenant, written.entry_id),
        )
    assert _given(admin_conn, tenant, written.entry_id) is None
    assert pooled.fill_given_tags(tenant) == 1
    assert _given(admin_conn, tenant, written.entry_id) == ["Redis", "Etcd"]


def test_a_database_at_42_takes_todays_code_then_0043_in_step(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    with database_at(database, admin_conn, 42) as urls:
        app, owner = connect(urls.app), connect(urls.admin)
        try:
            memory = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            written = memory.record_entry(
                tenant, entry(TITLE, SUMMARY, tags=["Redis"]), context()
            ).entry
            memory.correct_entry(tenant, written.entry_id, {"tags": ["Redis", "Etcd"]}, context())
            assert memory.fill_given_tags(tenant) == 0
            migrate(urls.admin, up_to=43)
            app.close()
            app = connect(urls.app)
            memory = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            assert memory.get_entry(tenant, written.entry_id).tags == ["Redis", "Etcd"]
            memory.correct_entry(tenant, written.entry_id, {"tags": ["Consul"]}, context())
            assert _given(owner, tenant, written.entry_id) == ["Consul"]
            _old_writer_corrects(owner, tenant, written.entry_id, ["Zookeeper"], 4)
            assert _given(owner, tenant, written.entry_id) is None
            assert memory.fill_given_tags(tenant) == 1
            assert memory.get_entry(tenant, written.entry_id).tags == ["zookeep"]
            assert _entry_mismatches(memory, tenant) == []
        finally:
            app.close()
            owner.close()


# ---------------------------------------------------------------- writers of other versions


# The deploy runs the migrations before it updates the functions (docs/OPERATIONS.md,
# step 5-6), and a failed deploy's rollback puts the previous functions back over the
# migrated schema: code that knows 0041 (it writes `given_tags` with the stems) but
# predates 0043 (it does not state grandbo.writes_given_tags) runs against the trigger.
# (a strict xfail until 0043's trigger left what a writer wrote itself)
def test_a_correction_by_code_of_0041_0042_keeps_the_tags_it_wrote(
    service: MemoryService,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=["Redis"]), context()).entry
    # the tenant scope of 88dd3fe (the release before 0043): the same writes, no setting
    monkeypatch.setattr(
        tenant_scope,
        "_EVERY_SCOPE",
        {k: v for k, v in tenant_scope._EVERY_SCOPE.items() if k != "grandbo.writes_given_tags"},
    )
    service.correct_entry(tenant, written.entry_id, {"tags": ["Memcached"]}, context())
    monkeypatch.undo()
    # until the backfill (the hourly Lambda) the entry, its hits and the console show the
    # stems; the backfill gives them back from the event (it names them)
    shown = service.get_entry(tenant, written.entry_id).tags
    service.fill_given_tags(tenant)
    filled = service.get_entry(tenant, written.entry_id).tags
    assert (shown, filled) == (["Memcached"], ["Memcached"])


# (a strict xfail until 0043's trigger fired on a new revision too)
def test_a_pre_0041_correction_dropping_a_tag_its_text_says_leaves_no_stale_tag(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    title = "Memcached evicted the session keys"
    written = service.record_entry(tenant, entry(title, SUMMARY, tags=["Memcached"]), context())
    entry_id = written.entry.entry_id
    before = service.get_entry(tenant, entry_id)
    assert before.tags == ["Memcached"]
    # the older writer's correction: the tag removed, the text the same: the same stems
    assert tags_for([title, SUMMARY, ""], []) == list(before.index_tags)
    _old_writer_corrects(admin_conn, tenant, entry_id, [], 2, title=title)
    assert service.fill_given_tags(tenant) == 1  # emptied by 0043: the backfill's work
    shown = service.get_entry(tenant, entry_id).tags
    assert (shown, _entry_mismatches(service, tenant)) == ([], [])


# (a strict xfail until the fill wrote only the revision it replayed)
def test_the_backfill_racing_a_pre_0041_correction_leaves_no_stale_spelling(
    database: DatabaseUrls,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = connect(database.app)
    try:
        memory = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
        entry_id = memory.record_entry(
            tenant, entry(TITLE, SUMMARY, tags=["Redis"]), context()
        ).entry.entry_id
        _old_writer_corrects(admin_conn, tenant, entry_id, ["Zookeeper"], 2)
        assert _given(admin_conn, tenant, entry_id) is None  # the backfill's work

        replayed, go = threading.Event(), threading.Event()
        original = MemoryRepository._replayed

        def paused(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            replayed.set()
            assert go.wait(30)
            return result

        monkeypatch.setattr(MemoryRepository, "_replayed", staticmethod(paused))
        errors: list[BaseException] = []

        def fill() -> None:
            try:
                memory.fill_given_tags(tenant)
            except BaseException as exc:
                errors.append(exc)

        filler = threading.Thread(target=fill)
        filler.start()
        assert replayed.wait(30)
        _old_writer_corrects(admin_conn, tenant, entry_id, ["Etcd"], 3)  # not kept waiting
        go.set()
        filler.join(30)
        monkeypatch.undo()
        assert errors == []
        memory.fill_given_tags(tenant)  # the next hour's backfill
        assert memory.get_entry(tenant, entry_id).tags == ["etcd"]
    finally:
        app.close()


# ---------------------------------------------------------------- _ahead_of_migration


# (a strict xfail until the column was looked for in its own table)
@pytest.mark.parametrize(
    "query",
    [
        "SELECT rules FROM org_memory_entries WHERE tenant_id = %s",
        "SELECT e.given_tags FROM org_memory_events e WHERE e.tenant_id = %s",
    ],
    ids=["rules-of-entries", "given-tags-of-events"],
)
def test_an_undefined_column_on_a_migrated_database_is_a_bug_not_the_stores_state(
    app_conn: psycopg.Connection[Any], tenant: str, query: str
) -> None:
    repository = MemoryRepository(app_conn)
    with (
        pytest.raises(Exception) as raised,  # noqa: PT011 - either class, asserted below
        repository._tenant_scope(tenant) as cur,
    ):
        cur.execute(query, (tenant,))
    assert not isinstance(raised.value, StoreUnavailableError), raised.value


def test_a_column_of_its_own_name_elsewhere_is_never_taken_for_ours(
    app_conn: psycopg.Connection[Any], tenant: str
) -> None:
    repository = MemoryRepository(app_conn)
    for column in ("tags_given", "given_tags2", "rules_round", "spelling_rules"):
        with (
            pytest.raises(psycopg.errors.UndefinedColumn),
            repository._tenant_scope(tenant) as cur,
        ):
            cur.execute(f"SELECT {column} FROM org_memory_entries")  # noqa: S608
    # the scope's connection is usable after each
    assert repository.tenant_ids() is not None


# ---------------------------------------------------------------- spells_back, hostile


@pytest.mark.parametrize(
    ("written", "stems", "held"),
    [
        ((), (), True),
        (("",), ("",), True),
        (("",), ("redi",), False),
        (("Redis",), ("redi",), True),
        (("REDIS",), ("redi",), True),
        (
            ("\uff52\uff45\uff44\uff49\uff53",),
            ("redi",),
            True,
        ),  # full-width: NFKC reads it as the word
        (("Redis", "etcd"), ("etcd", "redi"), False),  # order is kept
        (("Redis",), ("redi", "etcd"), False),
        (("x" * 100_000,), ("x" * 100_000,), True),
        (("é" * 5_000,), ("é" * 5_000,), True),
        (("Re\u200ddis",), ("redi",), False),
        (("team0-shard0",), ("team0-shard0",), True),
        # another word of the same stem: accepted, as any lake's spelling of it would be
        (("universe",), ("univers",), True),
        (("evicted",), ("evict",), True),
        (("evictions",), ("evict",), True),
    ],
)
def test_spells_back_answers_hostile_spellings_without_raising(
    written: tuple[str, ...], stems: tuple[str, ...], held: bool
) -> None:
    assert spells_back(written, stems) is held


def test_a_rebuild_keeps_a_redacted_words_spelling_only_as_an_inflection_of_its_own_stem(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    source = service.record_entry(
        tenant,
        entry(
            "Evictions emptied the session store",
            "Session keys were evicted by memory pressure while caching was off for an hour.",
        ),
        context(),
    ).entry
    legacy = _legacy_event(admin_conn, tenant, ["evict"])
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, legacy).tags == ["evictions"]
    service.redact_entry(tenant, source.entry_id, "a customer's name", context())
    assert service.repository.verify_projection(tenant).mismatches == []
    service.repository.rebuild_projection(tenant)
    # kept (the word the redacted text said), and no more than its own stem's inflection
    kept = service.get_entry(tenant, legacy).tags
    assert kept == ["evictions"]
    assert spells_back(kept, ["evict"])
