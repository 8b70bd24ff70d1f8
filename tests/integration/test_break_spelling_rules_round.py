"""Trying to break the spelling rules' second round (commit 88dd3fe, migration 0042) as an
attacker, a crowd, with hostile bytes and as production runs.

A probe that found a defect is kept as a strict xfail naming it; a probe the change holds
against is kept as a plain test asserting what held.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from grandbo.memory.curation.audit import audit, repair
from grandbo.memory.domain.log_quotes import REMOVED
from grandbo.memory.domain.retrieval_log import RetrievalRecord
from grandbo.memory.domain.topic import MAX_TOPIC_CHARS, validate_topic
from grandbo.memory.service import MemoryService
from grandbo.text.spelling import (
    SPELLING_RULES,
    _first_rules,
    spelling,
    spelling_digest,
    spellings,
)

from .helpers import context, entry
from .test_break_redaction_spellings import UNRELATED, _b64, _lesson, _log, _readable, _secret
from .test_spelling_rules_round import _log_as_first_round, _rules

# the bound of migration 0040's check on write: the first 8,000 characters of a
# question's spellings
CHECKED_ON_WRITE = 8000


def _later() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=5)


def _earlier() -> datetime:
    return datetime.now(UTC) - timedelta(minutes=1)


def _nested_filler() -> str:
    """~3,400 characters of base64 of base64 of base64 of plain words: each level is
    decoded and spelled (three deep), ~9,000 spelled characters from one token."""
    text = ("the pool was fine " * 100)[:1434].encode()
    return _b64(_b64(_b64(text)))


def _redacted(service: MemoryService, tenant: str, secret: str) -> None:
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    outcome = service.redact_entry(tenant, lesson, "a token was pasted", context())
    assert outcome.receipt is not None


def _spelled_rows(admin: psycopg.Connection[Any], tenant: str) -> dict[str, tuple[str, int]]:
    rows = admin.execute(
        "SELECT r.caller, s.spelled, s.rules FROM org_memory_retrievals r"
        " JOIN org_memory_retrieval_spellings s USING (tenant_id, retrieval_id)"
        " WHERE r.tenant_id = %s",
        (tenant,),
    ).fetchall()
    return {caller: (spelled, rules) for caller, spelled, rules in rows}


# --- the check on write reads 8,000 spelled characters: the second round's spellings
# --- (nested decodings, the first round's kept last) reach past it -----------------------


# (a strict xfail until a text's own spelling came first and the others shortest first)
def test_a_question_after_the_redaction_cannot_push_the_secret_past_the_check(
    service: MemoryService, tenant: str
) -> None:
    secret = _secret()
    topic = f"decode {_nested_filler()} and then {_b64(secret)} please"
    assert validate_topic(topic) == topic
    assert len(topic) <= MAX_TOPIC_CHARS
    spelt = spellings(topic)
    # the current rules do find it, but past what the database checks on write
    assert 0 <= spelt.find(spelling(secret)) < CHECKED_ON_WRITE
    _redacted(service, tenant, secret)
    _log(service, tenant, "after", topic, at=_later())
    assert _readable(service, tenant)["after"] == (REMOVED, None)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "the second round reads a Greek capital iota as i, so a secret's l written as U+0"
        "399 (the glyph of I and l) is found only in the first round's spelling, which is"
        " as long as the question's own: behind a long question it lies past the 8,000 ch"
        "aracters the check on write reads (a window of 16,000 doubled the check's cost: "
        "a swollen question's write then outlived its bound), and a question filed after "
        "the redaction keeps the secret until the audit finds it"
    ),
)
def test_a_capital_iota_for_an_l_is_caught_on_write_in_a_long_question(
    service: MemoryService, tenant: str
) -> None:
    secret = _secret()  # ...xL4: its spelling holds an l
    disguised = secret.replace("L", "\u0399")
    short = f"who pasted {disguised} here"
    assert spelling(secret) not in spelling(short)  # the second round reads ...xi4
    assert spelling(secret) in spellings(short)  # the first round's, kept beside it
    topic = f"who pasted {_nested_filler()} and then {disguised}"
    assert validate_topic(topic) == topic
    assert spellings(topic).find(spelling(secret)) > CHECKED_ON_WRITE
    _redacted(service, tenant, secret)
    _log(service, tenant, "short", short, at=_later())
    assert _readable(service, tenant)["short"] == (REMOVED, None)  # what held
    _log(service, tenant, "long", topic, at=_later())
    assert _readable(service, tenant)["long"] == (REMOVED, None)


def _with_first_round_digest(
    service: MemoryService, tenant: str, admin: psycopg.Connection[Any], listed: str
) -> None:
    """A redaction made before 0042: the listed string's kept digest is of the first
    round's spelling (the current one's replaced by it)."""
    lesson = service.record_entry(
        tenant,
        entry(
            "Passphrase shared in chat",
            "The vault passphrase was shared in the incident chat by mistake.",
        ),
        context(),
    ).entry.entry_id
    service.redact_entry(tenant, lesson, "a passphrase", context(), also=[listed])
    (salt,) = admin.execute(
        "SELECT salt FROM org_memory_spelling_salts WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    salt = bytes(salt)
    now, then = spelling(listed), _first_rules(listed)
    assert now != then
    deleted = admin.execute(
        "DELETE FROM org_memory_redacted_spellings WHERE tenant_id = %s AND digest = %s",
        (tenant, spelling_digest(salt, now)),
    ).rowcount
    assert deleted == 1
    admin.execute(
        "INSERT INTO org_memory_redacted_spellings (tenant_id, length, digest, entry_id)"
        " VALUES (%s, %s, %s, %s)",
        (tenant, len(then), spelling_digest(salt, then), lesson),
    )


def test_a_first_round_digest_still_matches_a_question_spelled_by_the_second(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    listed = "Gehéim-Wört-9931"
    _with_first_round_digest(service, tenant, admin_conn, listed)
    _log(service, tenant, "after", f"who shared {listed} in the channel", at=_later())
    assert _readable(service, tenant)["after"] == (REMOVED, None)
    _log(service, tenant, "unrelated", UNRELATED, at=_later())
    assert _readable(service, tenant)["unrelated"] == (UNRELATED, None)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "a redaction's first-round digest (kept before 0042) of a non-ASCII string is mat"
        "ched only by the first round's spelling, as long as the question's own: behind a"
        " long question it lies past the 8,000 characters the check on write reads, and a"
        " question filed after the upgrade keeps the string until the audit finds it"
    ),
)
def test_a_first_round_digest_matches_a_long_question_on_write(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    listed = "Gehéim-Wört-9931"
    _with_first_round_digest(service, tenant, admin_conn, listed)
    topic = f"who shared {_nested_filler()} and then {listed}"
    assert validate_topic(topic) == topic
    assert spellings(topic).find(_first_rules(listed)) > CHECKED_ON_WRITE
    _log(service, tenant, "after", topic, at=_later())
    assert _readable(service, tenant)["after"] == (REMOVED, None)


# --- the bounds as an attacker's tools ----------------------------------------------------


# (a strict xfail until the decodings were bounded by their size, not their count)
def test_sixty_four_decoys_do_not_hide_the_secrets_base64(
    service: MemoryService, tenant: str
) -> None:
    secret = _secret()
    decoys = " ".join(_b64(f"field {n:02d} ok") for n in range(64))
    topic = f"kubectl get secret shows {decoys} and {_b64(secret)} for the vault"
    assert validate_topic(topic) == topic
    assert spelling(secret) in spellings(topic)  # decoded, the decoys too
    _log(service, tenant, "before", topic)
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    outcome = service.redact_entry(tenant, lesson, "a token was pasted", context())
    assert outcome.receipt is not None
    assert outcome.receipt.left == 0
    _log(service, tenant, "after", topic, at=_later())
    readable = _readable(service, tenant)
    assert _b64(secret) not in readable["before"][0]
    assert _b64(secret) not in readable["after"][0]


# (a strict xfail until the glues nearest each end of a token were tried)
def test_thirty_three_glues_do_not_hide_glued_base64(service: MemoryService, tenant: str) -> None:
    secret = _secret()
    topic = f"env {'X-' * 33}{_b64(secret)} leaked from the pod"
    assert spelling(secret) in spellings(topic)
    _log(service, tenant, "before", topic)
    _redacted(service, tenant, secret)
    _log(service, tenant, "after", topic, at=_later())
    readable = _readable(service, tenant)
    assert _b64(secret) not in readable["before"][0]
    assert _b64(secret) not in readable["after"][0]


def _glue_swollen() -> str:
    """A 4,000-character question of one base64 token whose every fourth character is a
    `/` (the text's every third byte a `?`): the suffix after each of its first 32 glues,
    and the prefix before, decode whole, 64 texts of up to 2,900 characters each."""
    return "decode " + _b64(b"ab?" * 1000)[:3988] + " ok"


def test_a_crafted_question_spells_quickly(service: MemoryService, tenant: str) -> None:
    _redacted(service, tenant, _secret())
    for topic in (
        _glue_swollen(),
        "decode " + _nested_filler(),
        ("aaaaaaaa-" * 445)[:4000],
        " ".join(["a-" * 20 + "aaaaaaaa"] * 80)[:4000],
        " ".join(_b64(f"field {n:03d} ok") for n in range(200))[:4000],
    ):
        assert len(topic) <= MAX_TOPIC_CHARS
        started = time.perf_counter()
        spellings(topic)
        assert time.perf_counter() - started < 2.0
        started = time.perf_counter()
        _log(service, tenant, f"crafted-{len(topic)}", topic, at=_later())
        assert time.perf_counter() - started < 2.0


# (a strict xfail until a token decoded to no more than its length (no overlapping parts))
def test_a_questions_spellings_stay_within_what_the_write_checks(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    topic = _glue_swollen()
    _log(service, tenant, "swollen", topic)
    spelled, _ = _spelled_rows(admin_conn, tenant)["swollen"]
    assert len(spelled) <= CHECKED_ON_WRITE


# --- encodings that still survive ---------------------------------------------------------


def _pem_wrapped(secret: str) -> str:
    """A pasted base64 blob wrapped at 64 characters (PEM, kubeconfig, `base64` at 76):
    every line decodes alone, and the secret is split across two lines."""
    blob = _b64(("x" * 40 + secret + "y" * 60).encode())
    lines = [blob[i : i + 64] for i in range(0, len(blob), 64)]
    return "the kubeconfig data was\n" + "\n".join(lines) + "\nwhat leaked"


_HELD_NOW: dict[str, Any] = {
    # UTF-16 of either byte order (the reading with more ASCII chosen), a blob wrapped
    # over lines (its base64 lines joined), hex with its 0x mark
    "utf16-be-base64": lambda s: f"powershell -enc {_b64(s.encode('utf-16-be'))}",
    "utf16-be-hex": lambda s: f"the token in hex is {s.encode('utf-16-be').hex()}",
    "base64-wrapped-across-lines": _pem_wrapped,
    "hex-0x-prefixed": lambda s: f"memory at 0x{s.encode().hex()} was dumped",
}
_SURVIVING: dict[str, Any] = {
    # base64 cut in two is spelled apart: neither half holds the secret
    "base64-in-two-halves": lambda s: f"first {_b64(s[:10])} then {_b64(s[10:])} concatenated",
    "base64-padding-in-the-middle": lambda s: f"token {_b64(s[:10])}{_b64(s[10:])} leaked",
    # not claimed, but a spelling all the same
    "base32": lambda s: f"totp seed {base64.b32encode(s.encode()).decode()} leaked",
}


@pytest.mark.parametrize("variant", list(_HELD_NOW))
def test_an_encoding_the_second_round_reads_leaves_the_log(
    service: MemoryService, tenant: str, variant: str
) -> None:
    secret = _secret().translate(str.maketrans("01", "89"))
    topic = _HELD_NOW[variant](secret)
    _log(service, tenant, "before", topic)
    _redacted(service, tenant, secret)
    _log(service, tenant, "after", topic, at=_later())
    readable = _readable(service, tenant)
    assert readable["before"][0] != topic
    assert readable["after"][0] != topic


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a secret in base64 cut in two tokens (or two encodings run together, padding "
    "in the middle) or in base32 is spelled by no rule: kept before the redaction and "
    "after it",
)
@pytest.mark.parametrize("variant", list(_SURVIVING))
def test_an_encoding_of_the_secret_leaves_the_log(
    service: MemoryService, tenant: str, variant: str
) -> None:
    # no 0 or 1: read as UTF-16-LE, a big-endian 0 or 1 is U+3000 or U+3100, not
    # printable, and the big-endian reading is then tried (a secret with neither survives)
    secret = _secret().translate(str.maketrans("01", "89"))
    assert len(secret) == 20
    topic = _SURVIVING[variant](secret)
    _log(service, tenant, "before", topic)
    _redacted(service, tenant, secret)
    _log(service, tenant, "after", topic, at=_later())
    readable = _readable(service, tenant)
    assert readable["before"][0] != topic
    assert readable["after"][0] != topic


def test_the_claimed_encodings_and_look_alikes_leave_the_log(
    service: MemoryService, tenant: str
) -> None:
    secret = _secret()
    b64 = _b64(secret)
    held = {
        "utf16-le-with-bom": f"powershell -enc {_b64(secret.encode('utf-16'))}",
        "hex-mixed-case": "hex "
        + "".join(c.upper() if i % 3 else c for i, c in enumerate(secret.encode().hex())),
        "base64-of-hex": f"decode {_b64(secret.encode().hex())}",
        "hex-of-base64": f"decode {b64.encode().hex()}",
        "base64url-glued-both-sides": "env X_"
        + base64.urlsafe_b64encode(secret.encode()).decode()
        + "_Y",
        "basic-auth": f"Authorization: Basic {_b64('svc:' + secret)} was logged",
        "path-after-a-dot": f"GET vault.example.{b64} returned 403",
    }
    for name, topic in held.items():
        _log(service, tenant, f"before-{name}", topic)
    _redacted(service, tenant, secret)
    for name, topic in held.items():
        _log(service, tenant, f"after-{name}", topic, at=_later())
    readable = _readable(service, tenant)
    for name, topic in held.items():
        for when in ("before", "after"):
            assert readable[f"{when}-{name}"][0] != topic, (when, name)
            assert secret not in readable[f"{when}-{name}"][0]


# --- false positives ----------------------------------------------------------------------


def test_questions_in_other_languages_and_encodings_are_left_alone(
    service: MemoryService, tenant: str
) -> None:
    asked = {
        "french": "le délai d'attente du pool de connexions a été dépassé après le déploiement",
        "german": "Der Verbindungspool ist nach dem Deployment erschöpft, Zähler über Größe",
        "greek": "ΙΣΤΟΡΙΚΟ: η δεξαμενή συνδέσεων εξαντλήθηκε μετά την ανάπτυξη",
        "russian": "пул соединений исчерпан после развертывания сервиса оплаты",
        "japanese": "デプロイ後にデータベース接続プールが枯渇しました。ガベージ",
        "vietnamese": "Người dùng không thể thanh toán sau khi triển khai dịch vụ",
        "hashes": "commit 3f9a2c4e7b1d0a8f6e5d4c3b2a1908f7e6d5c4b3 broke the checkout api",
        "a-jwt": "is eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJzdmMifQ valid",
        "urls": "GET /api/v1/orders/9f8e7d6c-5b4a-3210-fedc-ba9876543210/items 502",
    }
    for name, topic in asked.items():
        _log(service, tenant, name, topic)
    lesson = service.record_entry(
        tenant,
        entry("Door code shared in chat", "The server room door code was shared in chat."),
        context(),
    ).entry.entry_id
    # short listed strings, accented and not, whose letters are common in those words
    outcome = service.redact_entry(
        tenant, lesson, "codes", context(), also=["zx9q", "Wörtq", "ΨΩ7κ"]
    )
    assert outcome.receipt is not None
    readable = _readable(service, tenant)
    assert {name: readable[name][0] for name in asked} == asked


# --- the rules round: writers, settings, batches, races -----------------------------------


def test_the_round_does_not_leak_into_the_connections_next_statement(
    service: MemoryService,
    tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    _log(service, tenant, "today", "checkout pool exhausted after the deploy")
    # the same pooled autocommit connection the service wrote on
    (setting,) = app_conn.execute(
        "SELECT current_setting('grandbo.spelling_rules', true)"
    ).fetchone()
    assert setting in (None, "")
    _log_as_first_round(app_conn, tenant, "older", "dns cache stale after failover", _earlier())
    # and within one explicit transaction of older code after it: still round 1
    with app_conn.transaction():
        _log_as_first_round(app_conn, tenant, "older-tx", "dns cache stale again", _earlier())
    assert _rules(admin_conn, tenant) == {
        "today": SPELLING_RULES,
        "older": 1,
        "older-tx": 1,
    }


def test_a_batch_of_two_organizations_is_checked_and_marked_each_alone(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    secret = _secret()
    _redacted(service, tenant, secret)
    at = _later()
    topic = f"is {secret.encode().hex()} still valid"

    def asked(who: str, caller: str) -> RetrievalRecord:
        return RetrievalRecord.model_construct(
            tenant_id=who,
            at=at,
            caller=caller,
            incident_id=None,
            topic=topic,
            hits=[],
            latency_ms=1.0,
            no_precedent=True,
        )

    service.repository.log_retrievals(
        [asked(tenant, "a1"), asked(other_tenant, "b1"), asked(tenant, "a2")]
    )
    mine, theirs = _readable(service, tenant), _readable(service, other_tenant)
    assert mine == {"a1": (REMOVED, None), "a2": (REMOVED, None)}
    assert theirs == {"b1": (topic, None)}  # they redacted nothing
    assert set(_rules(admin_conn, tenant).values()) == {SPELLING_RULES}
    assert _rules(admin_conn, other_tenant) == {"b1": SPELLING_RULES}


def test_one_organizations_repair_leaves_anothers_first_round_questions(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    secret = _secret()
    hexed = f"the token in hex is {secret.encode().hex()}"
    for org in (tenant, other_tenant):
        _log_as_first_round(app_conn, org, "hex, first round", hexed, _earlier())
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    service.redact_entry(tenant, lesson, "a token was pasted", context())
    repair(service, audit(service, tenant), build_index=lambda: [])
    assert _readable(service, tenant)["hex, first round"] == (REMOVED, None)
    assert _readable(service, other_tenant)["hex, first round"] == (hexed, None)
    assert _rules(admin_conn, other_tenant) == {"hex, first round": 1}
    assert service.repository.count_unspelled(other_tenant) == 1


# (a strict xfail until the repair kept a spelling only where the question still said
# what it was spelled from)
def test_a_repair_racing_a_redaction_does_not_write_the_secret_back(
    service: MemoryService,
    tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    secret = _secret()
    _log_as_first_round(app_conn, tenant, "older", f"is {secret} revoked yet", _earlier())
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    # the repair's page read (grandbo.memory.curation.receipts_audit.respell) ...
    page = service.repository.spelt_questions(tenant, None, unspelled_only=True)
    assert [q.respelled for q in page] == [True]
    # ... a redaction commits meanwhile, scrubbing the question ...
    service.redact_entry(tenant, lesson, "a token was pasted", context())
    topic, _ = _readable(service, tenant)["older"]
    assert secret not in topic
    assert spelling(secret) not in _spelled_rows(admin_conn, tenant)["older"][0]
    # ... and the repair writes its page
    service.repository.keep_spellings(tenant, page)
    spelled, rules = _spelled_rows(admin_conn, tenant)["older"]
    assert rules == SPELLING_RULES
    assert spelling(secret) not in spelled
