"""The spelling rules' second round (migration 0042): each kept spelling says which round
of the rules made it; a question kept by the first round is searched by what that round
spelled, counted by the audit (`log_unspelled`), and re-spelled by its repair, after
which the secret it spelled in a way only the second round reads (hex) is found and
removed whole. A receipt's re-verification re-spells such a question as it reads it."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from grandbo.memory.curation.audit import audit, repair
from grandbo.memory.domain.log_quotes import REMOVED
from grandbo.memory.service import MemoryService
from grandbo.text.spelling import SPELLING_RULES, _first_rules, spellings

from .helpers import context
from .test_break_redaction_spellings import _lesson, _log, _readable


def _rules(admin: psycopg.Connection[Any], tenant: str) -> dict[str, int]:
    rows = admin.execute(
        "SELECT r.caller, s.rules FROM org_memory_retrievals r"
        " JOIN org_memory_retrieval_spellings s USING (tenant_id, retrieval_id)"
        " WHERE r.tenant_id = %s",
        (tenant,),
    ).fetchall()
    admin.commit()
    return {caller: rules for caller, rules in rows}


def _log_as_first_round(
    conn: psycopg.Connection[Any], tenant: str, caller: str, topic: str, at: datetime
) -> None:
    """A writer of code from before 0042 (a rolling deploy): the 10-argument function,
    with what the first round of the rules spelled, and no round stated."""
    conn.execute(
        "SELECT grandbo_log_retrieval(%s, %s, %s, NULL, %s, '[]'::jsonb, 1, true, 100000, %s)",
        (tenant, at, caller, topic, _first_rules(topic)),
    )


def test_each_kept_spelling_says_its_round(
    service: MemoryService,
    tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    _log(service, tenant, "today", "checkout pool exhausted")
    earlier = datetime.now(UTC) - timedelta(minutes=1)
    _log_as_first_round(app_conn, tenant, "older writer", "checkout pool exhausted", earlier)
    assert _rules(admin_conn, tenant) == {"today": SPELLING_RULES, "older writer": 1}
    # the setting lived in its own statement's transaction only: the next write of
    # another path without it is the first round's again
    _log_as_first_round(app_conn, tenant, "older again", "dns cache stale", earlier)
    assert _rules(admin_conn, tenant)["older again"] == 1


def test_a_first_round_question_is_counted_re_spelled_and_then_found(
    service: MemoryService,
    tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    secret = f"Zq7vIc2mP{uuid.uuid4().hex[:8]}xL4"
    hexed = f"the token in hex is {secret.encode().hex()}"
    assert secret.casefold() not in _first_rules(hexed)  # only the second round reads it
    assert secret.casefold() in spellings(hexed)
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    earlier = datetime.now(UTC) - timedelta(minutes=1)
    _log_as_first_round(app_conn, tenant, "hex, first round", hexed, earlier)
    _log(service, tenant, "hex, today", hexed)
    _log(service, tenant, "unrelated", "checkout requests time out waiting for the pool")

    (unspelled,) = [f for f in audit(service, tenant).findings if f.check == "log_unspelled"]
    assert unspelled.count == 1  # only the first round's question

    outcome = service.redact_entry(tenant, lesson, "a token was pasted", context())
    assert outcome.receipt is not None
    readable = _readable(service, tenant)
    assert secret.encode().hex() not in readable["hex, today"][0]
    # searched by what the first round spelled: not reached by the redaction itself ...
    assert readable["hex, first round"][0] == hexed
    # ... but its receipt's re-verification re-spells it as it reads it, and says so
    health = audit(service, tenant)
    checks = {f.check: f for f in health.findings}
    assert checks["redaction_receipts"].count == 1
    assert checks["log_unspelled"].count == 1
    repaired = repair(service, health, build_index=lambda: [])
    assert {f.check for f in repaired.findings if f.repaired} >= {
        "redaction_receipts",
        "log_unspelled",
    }
    readable = _readable(service, tenant)
    assert readable["hex, first round"] == (REMOVED, None)
    assert readable["unrelated"][0] == "checkout requests time out waiting for the pool"
    assert set(_rules(admin_conn, tenant).values()) == {SPELLING_RULES}
    after = audit(service, tenant)
    assert not [f for f in after.findings if f.check in ("log_unspelled", "redaction_receipts")]


def test_past_its_bound_a_redaction_says_how_many_it_did_not_spell(
    service: MemoryService,
    tenant: str,
    app_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from grandbo.memory.repository import log_scrub

    secret = f"Zq7vIc2mP{uuid.uuid4().hex[:8]}xL4"
    encoded = base64.b64encode(secret.encode()).decode()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    earlier = datetime.now(UTC) - timedelta(minutes=1)
    for caller in ("older one", "older two", "older three"):
        # code from before 0040: the database spells it (no base64 decoded)
        app_conn.execute(
            "SELECT grandbo_log_retrieval(%s, %s, %s, NULL, %s, '[]'::jsonb, 1, true, 100000)",
            (tenant, earlier, caller, f"decode {encoded} please"),
        )
    monkeypatch.setattr(log_scrub, "MAX_RESPELLED", 1)
    outcome = service.redact_entry(tenant, lesson, "a token was pasted", context())
    assert outcome.receipt is not None
    places = {p.place: p for p in outcome.receipt.places}
    unspelled = places[log_scrub.UNSPELLED_PLACE]
    assert (unspelled.found, unspelled.removed, unspelled.left) == (2, 0, 2)
    assert outcome.receipt.left >= 2  # never "nothing left" for what it did not look at
    readable = _readable(service, tenant)
    assert sum(encoded in readable[c][0] for c in ("older one", "older two", "older three")) == 2
