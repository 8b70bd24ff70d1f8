"""Issue 53 point 1 ("tags are words", commit 2787024), attacked: hostile tags, lake
imports whose `given_tags` disagree with their `tags`, redactions, corrections naming
`tags: []`, rebuilds over mixed legacy and new events, the backfill racing a correction,
another organization's data, the hit's and the MCP answer's tags, staleness, and a
database at version 40 migrated to 41.

What holds is a plain test; each defect found is a strict xfail saying what is wrong."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb
from starlette.datastructures import FormData

from grandbo.agent.answer_text import answer_text, structured_answer
from grandbo.console.entry_pages import given_tags_of
from grandbo.console.forms import tags_of
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import InvalidInputError
from grandbo.memory.domain.lake_stream import LakeEvent, StreamDigest, read_stream
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.text.tags import tags_for, tokenize
from grandbo.topology.learned.staleness import named_by

from .helpers import context, database_at, entry, log_answer

TITLE = "Service discovery lost the cache nodes"
SUMMARY = (
    "After the registry restarted, clients resolved no cache nodes for ten minutes and "
    "every request fell through to the primary store."
)


# ---------------------------------------------------------------- builders


def _legacy_event(
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    tags: list[str],
    *,
    title: str = TITLE,
    summary: str = SUMMARY,
    service: str | None = None,
    entry_id: uuid.UUID | None = None,
    event_type: str = "entry_created",
    revision: int = 1,
) -> uuid.UUID:
    """An `entry_created` (or `entry_corrected`) event as versions before migration 0041
    wrote it: the index's stems only, no `given_tags`."""
    entry_id = entry_id or uuid.uuid4()
    payload: dict[str, Any] = {
        "title": title,
        "summary": summary,
        "service": service,
        "tags": tags_for([title, summary, service or ""], tags),
    }
    if event_type == "entry_created":
        payload |= {"origin": "admin", "incident_id": None, "kind": "durable"}
    admin_conn.execute(
        "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
        " actor, idempotency_key) VALUES (%s, %s, %s, %s, %s, 'admin', %s)",
        (tenant, entry_id, event_type, revision, Jsonb(payload), f"legacy-{uuid.uuid4()}"),
    )
    admin_conn.commit()
    return entry_id


def _unfill(admin_conn: psycopg.Connection[Any], tenant: str, entry_id: uuid.UUID) -> None:
    """The row as migration 0041 left it: given_tags NULL, the backfill not run yet."""
    admin_conn.execute(
        "UPDATE org_memory_entries SET given_tags = NULL WHERE tenant_id = %s AND entry_id = %s",
        (tenant, entry_id),
    )
    admin_conn.commit()


def _created_payload(given: list[Any] | None, **changes: Any) -> dict[str, Any]:
    title, summary, service = TITLE, SUMMARY, "discovery-api"
    payload: dict[str, Any] = {
        "title": title,
        "summary": summary,
        "tags": tags_for([title, summary, service], [g for g in given or [] if isinstance(g, str)]),
        "service": service,
        "origin": "admin",
        "incident_id": None,
        "kind": "durable",
    }
    if given is not None:
        payload["given_tags"] = given
    return {**payload, **changes}


def _import(service: MemoryService, tenant: str, payloads: list[dict[str, Any]]) -> None:
    """A stream whose manifest and chain match its events (what a hostile exporter sends)."""
    digest = StreamDigest(tenant)
    lines = [
        digest.add(
            LakeEvent.model_validate(
                {
                    "entry_id": str(uuid.uuid4()),
                    "event_type": "entry_created",
                    "revision": 1,
                    "payload": payload,
                    "actor": "admin:ops",
                    "idempotency_key": f"admin:ops:{uuid.uuid4()}",
                    "recorded_at": "2026-11-01T00:00:00+00:00",
                }
            )
        )
        for payload in payloads
    ]
    LakeTransfer(service).import_stream(
        tenant, read_stream([*lines, digest.manifest().line()]), rename=True
    )


def _event_payloads(
    admin_conn: psycopg.Connection[Any], tenant: str, entry_id: uuid.UUID
) -> list[dict[str, Any]]:
    rows = admin_conn.execute(
        "SELECT payload FROM org_memory_events WHERE tenant_id = %s AND entry_id = %s"
        " ORDER BY event_id",
        (tenant, entry_id),
    ).fetchall()
    return [row[0] for row in rows]


def _logged_topic(admin_conn: psycopg.Connection[Any], tenant: str) -> str:
    row = admin_conn.execute(
        "SELECT topic FROM org_memory_retrievals WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert row is not None
    return str(row[0])


# ---------------------------------------------------------------- hostile tags: what holds


@pytest.mark.parametrize(
    "tags",
    [
        ["x" * 65],  # past the 64 characters
        [f"tag{i}" for i in range(51)],  # past the 50 tags
        ["redis\x07"],  # a control character
        ["red\x00is"],  # NUL
        ["\ud800"],  # a lone surrogate
    ],
    ids=["65-chars", "51-tags", "bell", "nul", "surrogate"],
)
def test_a_tag_past_the_bounds_or_unsafe_is_refused_and_nothing_is_written(
    service: MemoryService, tenant: str, tags: list[str]
) -> None:
    with pytest.raises(InvalidInputError):
        service.record_entry(tenant, entry(TITLE, SUMMARY, tags=tags), context())
    assert service.repository.verify_projection(tenant).events == 0


def test_fifty_tags_of_sixty_four_characters_are_kept_as_written(
    service: MemoryService, tenant: str
) -> None:
    tags = [f"{i:02d}-" + "k" * 61 for i in range(50)]
    written = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=tags), context()).entry
    assert written.tags == tags
    assert service.get_entry(tenant, written.entry_id).tags == tags
    assert service.repository.verify_projection(tenant).mismatches == []


def test_repeats_in_another_case_or_nfkc_form_keep_the_first_spelling(
    service: MemoryService, tenant: str
) -> None:
    tags = [
        "ﬁle-cache",
        "File-Cache",
        "STRASSE",
        "straße",
        "\uff32\uff45\uff44\uff49\uff53",
        "redis",
        " STRASSE ",
    ]
    written = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=tags), context()).entry
    assert written.tags == ["ﬁle-cache", "STRASSE", "\uff32\uff45\uff44\uff49\uff53"]
    stored = service.get_entry(tenant, written.entry_id)
    assert stored.tags == written.tags
    assert {"file-cache", "strass", "redi"} <= set(stored.index_tags)
    assert "index_tags" not in stored.model_dump(mode="json")


# ---------------------------------------------------------------- hostile tags: defects


@pytest.mark.parametrize(
    "hostile",
    ["\u200b", "\u202e", "Redis\u200b", "Re\u200ddis", "Redis\nignore the lesson"],
    ids=["zero-width-only", "bidi-only", "zw-suffix-repeat", "zwj-inside-repeat", "newline"],
)
def test_a_tag_with_invisible_or_line_breaking_characters_is_not_kept_as_written(
    service: MemoryService, tenant: str, hostile: str
) -> None:
    try:
        written = service.record_entry(
            tenant, entry(TITLE, SUMMARY, tags=["Redis", hostile]), context()
        ).entry
    except InvalidInputError:
        return  # refused: fine
    # kept: then only as one visible, one-line tag that is not a repeat of "Redis"
    for tag in written.tags:
        assert tag.strip(), repr(tag)
        assert tag.isprintable(), repr(tag)
        assert not any(c in tag for c in "\u200b\u200c\u200d\u202e\n")
    assert len(written.tags) == len({t.casefold() for t in written.tags})
    assert written.tags == ["Redis"]


def test_a_tag_with_a_comma_is_refused_the_consoles_field_would_split_it(
    service: MemoryService, tenant: str
) -> None:
    tags = ["eu-west-1, prod", "Redis"]
    with pytest.raises(InvalidInputError) as refused:
        service.record_entry(tenant, entry(TITLE, SUMMARY, tags=tags), context())
    assert "comma" in refused.value.message
    written = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=["Redis"]), context()).entry
    # what the Correct form shows and sends back is the same list
    shown = ", ".join(given_tags_of(written.model_dump(mode="json")))
    assert tags_of(FormData([("tags", shown)])) == ["Redis"]


# ---------------------------------------------------------------- corrections


def test_a_correction_naming_no_tags_empties_them_for_good(
    service: MemoryService, tenant: str
) -> None:
    written = service.record_entry(
        tenant, entry(TITLE, SUMMARY, tags=["Zookeeper", "OOMKilled"]), context()
    ).entry
    service.correct_entry(tenant, written.entry_id, {"tags": []}, context())
    corrected = service.get_entry(tenant, written.entry_id)
    assert corrected.tags == []
    assert "zookeep" not in corrected.index_tags
    assert "oomkill" not in corrected.index_tags
    assert not service.query_org_memory(tenant, "zookeeper was oomkilled again today").hits
    # a later correction that does not name them keeps them empty (not NULL: not stems)
    service.correct_entry(tenant, written.entry_id, {"summary": SUMMARY + " Again."}, context())
    assert service.get_entry(tenant, written.entry_id).tags == []
    assert service.fill_given_tags(tenant) == 0
    assert service.repository.verify_projection(tenant).mismatches == []
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, written.entry_id).tags == []


def test_a_correction_before_the_backfill_does_not_freeze_stems_as_written_tags(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    service.record_entry(
        tenant,
        entry(
            "Redis evictions emptied the session store",
            "Redis evicted session keys under memory pressure; caching was off for an hour.",
        ),
        context(),
    )
    legacy = _legacy_event(admin_conn, tenant, ["Redis", "evictions"])
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, legacy).tags == ["redis", "evictions"]
    _unfill(admin_conn, tenant, legacy)
    assert service.get_entry(tenant, legacy).tags == ["redi", "evict"]
    # a person fixes a typo in the summary before the hourly backfill ran
    service.correct_entry(tenant, legacy, {"summary": SUMMARY + " (typo fixed)"}, context())
    service.fill_given_tags(tenant)
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, legacy).tags == ["redis", "evictions"]


# ---------------------------------------------------------------- lake imports


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (_created_payload(["Redis", 7]), "given_tags"),  # not a string
        (_created_payload(["Redis", None]), "given_tags"),
        (_created_payload([" Redis"]), "given_tags"),  # not trimmed as the write path
        (_created_payload(["Redis", "redis"]), "given_tags"),  # a repeat in another case
        (_created_payload(["Redis\x07"]), "given_tags"),  # a control character
        (_created_payload([f"t{i}" for i in range(51)]), "given_tags"),  # past 50
        # a given tag the index tags do not hold
        (_created_payload(["Zookeeper"], tags=tags_for([TITLE, SUMMARY, "discovery-api"])), "tags"),
        ({**_created_payload(["Redis"]), "given_tags": "Redis"}, "given_tags"),  # not a list
    ],
    ids=[
        "int",
        "null-item",
        "untrimmed",
        "case-repeat",
        "bell",
        "51",
        "given-not-indexed",
        "a-string",
    ],
)
def test_an_import_whose_given_tags_the_write_path_would_not_store_is_refused(
    service: MemoryService, tenant: str, payload: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        _import(service, tenant, [payload])
    assert field in refused.value.field
    assert service.repository.verify_projection(tenant).events == 0


def test_an_import_whose_given_tags_agree_is_shown_as_written_and_verifies(
    service: MemoryService, tenant: str
) -> None:
    _import(service, tenant, [_created_payload(["Zookeeper", "OOMKilled"])])
    assert service.repository.verify_projection(tenant).mismatches == []
    (hit,) = service.query_org_memory(tenant, "zookeeper oomkilled cache nodes").hits
    assert hit.tags == ["Zookeeper", "OOMKilled"]


def test_an_import_whose_index_tags_hold_more_than_its_given_tags_is_refused(
    service: MemoryService, tenant: str
) -> None:
    payload = _created_payload(["Redis"])
    payload["tags"] = [*payload["tags"], "kafka"]
    with pytest.raises(InvalidInputError):
        _import(service, tenant, [payload])


# ---------------------------------------------------------------- redaction


def test_a_redacted_entrys_given_tags_are_gone_from_entries_events_and_search(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    secret = "Project-Nightingale-7731"
    written = service.record_entry(
        tenant, entry(TITLE, SUMMARY, tags=[secret, "Zookeeper"]), context()
    ).entry
    service.correct_entry(
        tenant, written.entry_id, {"tags": ["Zookeeper", "Nightjar-Vault-4412"]}, context()
    )
    assert service.query_org_memory(tenant, "is nightjar-vault-4412 down again today").hits
    service.redact_entry(tenant, written.entry_id, "a code name", context())
    row = admin_conn.execute(
        "SELECT given_tags, tags FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s",
        (tenant, written.entry_id),
    ).fetchone()
    assert row == ([], [])
    for payload in _event_payloads(admin_conn, tenant, written.entry_id):
        said = str(payload).casefold()
        for word in ("nightingale", "nightjar", "zookeeper"):
            assert word not in said
    postings = admin_conn.execute(
        "SELECT count(*) FROM org_memory_tag_postings WHERE tenant_id = %s AND entry_id = %s",
        (tenant, written.entry_id),
    ).fetchone()
    assert postings == (0,)
    stats = admin_conn.execute(
        "SELECT tag FROM org_memory_tag_stats WHERE tenant_id = %s", (tenant,)
    ).fetchall()
    assert not {t for (t,) in stats} & {"project-nightingale-7731", "nightjar-vault-4412"}
    assert not service.query_org_memory(tenant, "is nightjar-vault-4412 zookeeper down").hits
    lines: list[str] = []
    LakeTransfer(service).export(tenant, lines.append)
    assert not any("ightingale" in line or "ightjar" in line for line in lines)
    service.repository.rebuild_projection(tenant)
    assert service.repository.verify_projection(tenant).mismatches == []


def test_a_redaction_scrubs_a_current_given_tag_quoted_in_the_log(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    written = service.record_entry(
        tenant, entry(TITLE, SUMMARY, tags=["PRJ-7731-NIGHTINGALE"]), context()
    ).entry
    log_answer(
        service, tenant, "cache nodes lost again, is PRJ-7731-NIGHTINGALE down", incident_id=None
    )
    service.redact_entry(tenant, written.entry_id, "a code name", context())
    assert "NIGHTINGALE" not in _logged_topic(admin_conn, tenant).upper()


def test_a_redaction_scrubs_an_earlier_revisions_given_tag_quoted_in_the_log(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    written = service.record_entry(
        tenant, entry(TITLE, SUMMARY, tags=["PRJ-7731-NIGHTINGALE"]), context()
    ).entry
    log_answer(
        service, tenant, "cache nodes lost again, is PRJ-7731-NIGHTINGALE down", incident_id=None
    )
    service.correct_entry(tenant, written.entry_id, {"tags": ["Zookeeper"]}, context())
    service.redact_entry(tenant, written.entry_id, "a code name", context())
    assert "NIGHTINGALE" not in _logged_topic(admin_conn, tenant).upper()


# (a strict xfail until the verify and the rebuild kept a spelling of the same stems:
# `ProjectionRebuild._spelled_as_kept`)
def test_redacting_the_entry_a_legacy_tag_was_spelled_from_leaves_no_drift(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    source = service.record_entry(
        tenant,
        entry(
            "Redis evictions emptied the session store",
            "Redis evicted session keys under memory pressure; caching was off for an hour.",
        ),
        context(),
    ).entry
    legacy = _legacy_event(admin_conn, tenant, ["Redis"])
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, legacy).tags == ["redis"]
    service.redact_entry(tenant, source.entry_id, "pasted a customer's name", context())
    assert service.repository.verify_projection(tenant).mismatches == []
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, legacy).tags == ["redis"]


# ---------------------------------------------------------------- legacy rows and rebuilds


def test_rebuild_verifies_after_mixed_legacy_and_new_text_events(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    service.record_entry(
        tenant,
        entry(
            "Zookeeper sessions expired under load",
            "Zookeeper expired client sessions when the ensemble was overloaded by watches.",
        ),
        context(),
    )
    # legacy created, then corrected by today's code (given_tags named)
    a = _legacy_event(admin_conn, tenant, ["Zookeeper"])
    # today's created, then a legacy correction (an import of an older lake's tail)
    b = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=["Memcached"]), context())
    b_id = b.entry.entry_id
    service.repository.rebuild_projection(tenant)
    service.correct_entry(tenant, a, {"tags": ["Etcd"]}, context())
    _legacy_event(
        admin_conn,
        tenant,
        ["Zookeeper"],
        entry_id=b_id,
        event_type="entry_corrected",
        revision=2,
    )
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, a).tags == ["Etcd"]
    assert service.get_entry(tenant, b_id).tags == ["zookeeper"]  # spelled back
    assert service.repository.verify_projection(tenant).mismatches == []
    _unfill(admin_conn, tenant, b_id)
    assert service.repository.verify_projection(tenant).mismatches == []  # pending
    assert service.fill_given_tags(tenant) == 1
    assert service.repository.verify_projection(tenant).mismatches == []


# (a strict xfail until migration 0043's trigger empties the tags as written of a row
# whose stems a writer that does not say it writes them rewrites)
def test_a_correction_by_a_writer_from_before_0041_does_not_leave_stale_given_tags(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    written = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=["Redis"]), context()).entry
    summary = SUMMARY + " Memcached replaced it."
    _legacy_event(
        admin_conn,
        tenant,
        ["memcached"],
        summary=summary,
        entry_id=written.entry_id,
        event_type="entry_corrected",
        revision=2,
    )
    # what the older writer's UPDATE set (it knows no given_tags), at its event's time
    admin_conn.execute(
        "UPDATE org_memory_entries SET summary = %s, tags = %s, revision = 2,"
        " updated_at = (SELECT recorded_at FROM org_memory_events WHERE tenant_id = %s"
        "   AND entry_id = %s AND revision = 2)"
        " WHERE tenant_id = %s AND entry_id = %s",
        (
            summary,
            tags_for([TITLE, summary], ["memcached"]),
            tenant,
            written.entry_id,
            tenant,
            written.entry_id,
        ),
    )
    admin_conn.commit()
    service.fill_given_tags(tenant)
    # spelled back from the lake: "memcached" is a word of its text, no tag of its own
    assert "Redis" not in service.get_entry(tenant, written.entry_id).tags
    # the entry agrees with the replay (this simulated writer rewrote the row alone, not
    # its postings and statistics, which the verification compares apart)
    mismatches = service.repository.verify_projection(tenant).mismatches
    assert [m for m in mismatches if m.startswith("entry ")] == []


def _hyphenated_legacy(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> tuple[uuid.UUID, list[str]]:
    """A legacy entry given 20 identifiers (stored as each identifier and its parts)."""
    service.record_entry(tenant, entry(TITLE, SUMMARY), context())
    given = [f"team{i}-shard{i}" for i in range(20)]
    legacy = _legacy_event(admin_conn, tenant, given)
    service.repository.rebuild_projection(tenant)
    return legacy, given


def test_a_legacy_entrys_identifier_tags_come_back_as_themselves(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    legacy, given = _hyphenated_legacy(service, tenant, admin_conn)
    assert service.get_entry(tenant, legacy).tags == given


def test_a_filled_legacy_entry_stays_correctable_without_naming_its_tags(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    legacy, _ = _hyphenated_legacy(service, tenant, admin_conn)
    kept = service.get_entry(tenant, legacy).tags
    assert len(kept) == 20  # each identifier once, not with its parts
    service.correct_entry(tenant, legacy, {"summary": SUMMARY + " (typo fixed)"}, context())
    assert service.get_entry(tenant, legacy).tags == kept


def _guarded(
    errors: list[BaseException],
    a_service: Any,
    work: Any,
) -> Any:
    """A thread's body: `work` on a service of its own connection, its error kept."""

    def run() -> None:
        service, conn = a_service()
        try:
            work(service)
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()

    return run


def test_the_backfill_never_overwrites_a_concurrent_correction(
    database: DatabaseUrls, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    def a_service() -> tuple[MemoryService, psycopg.Connection[Any]]:
        conn = connect(database.app)
        return MemoryService(MemoryRepository(conn), FakeEmbeddingProvider()), conn

    main, main_conn = a_service()
    try:
        main.record_entry(
            tenant,
            entry(
                "Redis evictions emptied the store",
                "Redis evicted session keys under memory pressure for an hour.",
            ),
            context(),
        )
        legacy = [_legacy_event(admin_conn, tenant, ["Redis", f"zk{i}x"]) for i in range(6)]
        main.repository.rebuild_projection(tenant)
        for round_ in range(3):
            for entry_id in legacy:
                _unfill(admin_conn, tenant, entry_id)
            wanted = [f"Etcd{round_}x{i}" for i in range(len(legacy))]
            errors: list[BaseException] = []
            fill = _guarded(errors, a_service, lambda s: s.fill_given_tags(tenant))
            correct = _guarded(
                errors,
                a_service,
                lambda s, wanted=wanted: [
                    s.correct_entry(tenant, entry_id, {"tags": [tag]}, context())
                    for entry_id, tag in zip(legacy, wanted, strict=True)
                ],
            )
            threads = [threading.Thread(target=fill), threading.Thread(target=correct)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert errors == []
            assert [main.get_entry(tenant, i).tags for i in legacy] == [[w] for w in wanted]
            main.fill_given_tags(tenant)
            assert [main.get_entry(tenant, i).tags for i in legacy] == [[w] for w in wanted]
        assert main.repository.verify_projection(tenant).mismatches == []
    finally:
        main_conn.close()


# ---------------------------------------------------------------- organizations


def test_another_organizations_words_never_spell_back_nor_show(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    # the other organization's lake says "Kubernetes"; ours never does
    service.record_entry(
        other_tenant,
        entry(
            "Kubernetes evicted the cache pods",
            "Kubernetes evicted every cache pod when the node ran out of memory.",
            tags=["Kubernetes", "OOMKilled"],
        ),
        context(),
    )
    service.record_entry(tenant, entry(TITLE, SUMMARY), context())
    legacy = _legacy_event(admin_conn, tenant, ["Kubernetes"])
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, legacy).tags == [tokenize("Kubernetes")[0]]
    _unfill(admin_conn, tenant, legacy)
    assert service.fill_given_tags(tenant) == 1
    assert service.get_entry(tenant, legacy).tags == [tokenize("Kubernetes")[0]]
    hits = service.query_org_memory(tenant, "kubernetes oomkilled evicted cache pods").hits
    assert all(hit.tags != ["Kubernetes", "OOMKilled"] for hit in hits)
    theirs = service.query_org_memory(other_tenant, "kubernetes oomkilled the cache pods").hits
    assert [hit.tags for hit in theirs] == [["Kubernetes", "OOMKilled"]]
    assert service.repository.verify_projection(other_tenant).mismatches == []


# ---------------------------------------------------------------- hits and the MCP answer


def test_the_hit_and_the_mcp_answer_carry_the_tags_as_written_never_index_stems(
    service: MemoryService, tenant: str
) -> None:
    service.record_entry(tenant, entry(TITLE, SUMMARY, tags=["Zookeeper", "OOMKilled"]), context())
    result = service.query_org_memory(tenant, "the registry restart lost the cache nodes")
    (hit,) = result.hits
    assert hit.tags == ["Zookeeper", "OOMKilled"]
    dumped = hit.model_dump(mode="json")
    assert dumped["tags"] == ["Zookeeper", "OOMKilled"]
    assert "index_tags" not in dumped
    document = structured_answer(result)
    assert "Zookeeper" in document["hits"][0]["tags"]
    assert "zookeep" not in document["hits"][0]["tags"]
    text = answer_text(result)
    assert "zookeep" not in text
    assert "restart" in text.casefold()


def test_the_mcp_structured_tags_list_a_word_once_whatever_its_case(
    service: MemoryService, tenant: str
) -> None:
    service.record_entry(tenant, entry(TITLE, SUMMARY, tags=["Redis", "OOMKilled"]), context())
    result = service.query_org_memory(tenant, "redis oomkilled lost the cache nodes")
    tags = structured_answer(result)["hits"][0]["tags"]
    assert len(tags) == len({t.casefold() for t in tags}), tags


# ---------------------------------------------------------------- staleness


@dataclass(frozen=True)
class _Change:
    kind: str
    service: str
    since: datetime
    replaced_by: str | None
    dependency: str | None


class _GoneDependency:
    """A topology in which `dependency` stopped being a dependency of every service: a
    lesson whose tags name it is stale (`named_by`, as the learned graph decides)."""

    def __init__(self, dependency: str) -> None:
        self.dependency = dependency

    def service_changes(
        self,
        tenant_id: str,
        subjects: Sequence[tuple[str, Collection[str]]],
        as_of: datetime | None = None,
    ) -> list[list[_Change]]:
        since = datetime(2026, 11, 1, tzinfo=UTC)
        return [
            [_Change("dependency_gone", service, since, None, self.dependency)]
            if named_by(tags, self.dependency)
            else []
            for service, tags in subjects
        ]


def test_a_hits_staleness_agrees_with_stale_entries_for_tags_as_written(
    app_conn: psycopg.Connection[Any], tenant: str
) -> None:
    memory = MemoryService(
        MemoryRepository(app_conn), FakeEmbeddingProvider(), topology=_GoneDependency("database")
    )
    written = memory.record_entry(
        tenant,
        entry(TITLE, SUMMARY, service="checkout", tags=["Database", "Redis"]),
        context(),
    ).entry
    assert [e for e, _ in memory.stale_entries(tenant)] == [written.entry_id]
    (hit,) = memory.query_org_memory(tenant, "registry restart lost the cache nodes").hits
    assert hit.staleness is not None


def test_a_legacy_hits_staleness_agrees_with_stale_entries(
    app_conn: psycopg.Connection[Any], tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    memory = MemoryService(
        MemoryRepository(app_conn), FakeEmbeddingProvider(), topology=_GoneDependency("database")
    )
    memory.record_entry(
        tenant,
        entry(
            "Pool sizing below the worker count",
            "The connection pool was sized below the worker count again after the deploy.",
        ),
        context(),
    )
    legacy = _legacy_event(admin_conn, tenant, ["database"], service="checkout")
    memory.repository.rebuild_projection(tenant)
    assert memory.get_entry(tenant, legacy).tags == ["databas"]  # no text spells it
    assert [e for e, _ in memory.stale_entries(tenant)] == [legacy]
    hits = memory.query_org_memory(tenant, "registry restart lost the cache nodes").hits
    (hit,) = [h for h in hits if h.entry_id == legacy]
    assert hit.staleness is not None


# ---------------------------------------------------------------- a database at 40


def test_a_database_at_40_with_entries_migrates_to_41_and_keeps_answering(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    with database_at(database, admin_conn, 40) as urls:
        app, owner = connect(urls.app), connect(urls.admin)
        try:
            memory = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            memory.record_entry(
                tenant,
                entry(
                    "Redis evictions emptied the session store",
                    "Redis evicted session keys under memory pressure; caching was off.",
                ),
                context(),
            )
            legacy = _legacy_event(owner, tenant, ["Redis", "Zookeeper"])
            memory.repository.rebuild_projection(tenant)
            # version 40 as it really was: no given_tags column (database_at adds it ahead)
            owner.execute("ALTER TABLE org_memory_entries DROP COLUMN given_tags")
            owner.commit()
            app.close()
            app = connect(urls.app)
            migrate(urls.admin, up_to=41)
            memory = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            nulls = owner.execute(
                "SELECT count(*) FROM org_memory_entries WHERE given_tags IS NULL"
            ).fetchone()
            assert nulls == (2,)
            assert memory.get_entry(tenant, legacy).tags == ["redi", "zookeep"]  # stems
            assert memory.query_org_memory(tenant, "redis evicted session keys").hits
            assert memory.repository.verify_projection(tenant).mismatches == []
            assert memory.fill_given_tags(tenant) == 2
            assert memory.get_entry(tenant, legacy).tags == ["redis", "zookeep"]
            (hit,) = [
                h
                for h in memory.query_org_memory(tenant, "redis zookeeper cache nodes").hits
                if h.entry_id == legacy
            ]
            assert hit.tags == ["redis", "zookeep"]
            assert memory.repository.verify_projection(tenant).mismatches == []
        finally:
            app.close()
            owner.close()


def test_an_import_with_a_given_tag_past_64_characters_names_given_tags(
    service: MemoryService, tenant: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        _import(service, tenant, [_created_payload(["x" * 65])])
    assert "given_tags" in refused.value.field


# (a strict xfail until the tenant scope answered a column of 0041 missing as the store's
# state, `grandbo.storage.tenant_scope._ahead_of_migration`, and the fill looked first)
def test_code_ahead_of_0041_fails_as_store_unavailable_never_undefined_column(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    from grandbo.errors import StoreUnavailableError

    with database_at(database, admin_conn, 40) as urls:
        app, owner = connect(urls.app), connect(urls.admin)
        try:
            memory = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            written = memory.record_entry(
                tenant, entry(TITLE, SUMMARY, tags=["Redis"]), context()
            ).entry
            owner.execute("ALTER TABLE org_memory_entries DROP COLUMN given_tags")
            owner.commit()
            app.close()
            app = connect(urls.app)
            memory = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            (hit,) = memory.query_org_memory(tenant, "registry restart lost the cache nodes").hits
            assert hit.tags == ["redi"]  # the stems show, as the search's comment says
            assert memory.fill_given_tags(tenant) == 0
            with pytest.raises(StoreUnavailableError, match="predates migration 0041"):
                memory.get_entry(tenant, written.entry_id)
            with pytest.raises(StoreUnavailableError, match="predates migration 0041"):
                memory.record_entry(tenant, entry("Another lesson", SUMMARY), context())
        finally:
            app.close()
            owner.close()
