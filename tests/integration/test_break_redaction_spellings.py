"""Trying to break issue 52 (a redaction in every spelling, at any size, with a receipt) as
an attacker, a crowd and with hostile bytes.

A probe that found a defect is kept as a strict xfail naming it; a probe the change holds
against is kept as a plain test asserting what held.
"""

from __future__ import annotations

import base64
import re
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.domain.log_quotes import REMOVED
from grandbo.memory.domain.retrieval_log import RetrievalRecord
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.text.spelling import spelling, spelling_digest

from .helpers import context, entry

UNRELATED = "checkout requests time out waiting for a database connection from the pool"


def _secret() -> str:
    """A telling token (letters and digits mixed, this test's own) with an upper-case I
    and a lower-case c."""
    return f"Zq7vIc2mP{uuid.uuid4().hex[:8]}xL4"


def _b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _log(
    service: MemoryService,
    tenant: str,
    caller: str,
    topic: str,
    incident: str | None = None,
    *,
    at: datetime | None = None,
) -> None:
    service.repository.log_retrievals(
        [
            RetrievalRecord.model_construct(
                tenant_id=tenant,
                at=at or datetime.now(UTC) - timedelta(minutes=1),
                caller=caller,
                incident_id=incident,
                topic=topic,
                hits=[],
                latency_ms=1.0,
                no_precedent=True,
            )
        ]
    )


def _readable(service: MemoryService, tenant: str) -> dict[str, tuple[str, str | None]]:
    return {r.caller: (r.topic, r.incident_id) for r in service.repository.retrievals(tenant)}


def _lesson(secret: str) -> dict[str, Any]:
    return entry(
        "Vault token pasted into the incident channel",
        f"During the outage the vault token {secret} was pasted into the incident channel; "
        "it was revoked within the hour.",
    )


# --- spellings of one secret, each a question of its own ---------------------------------


def _variants(secret: str) -> dict[str, str]:
    half = len(secret) // 2
    b64 = _b64(secret)
    return {
        # what held
        "full-width+hyphen": "who pasted "
        + f"{_full_width(secret[:half])}-{_full_width(secret[half:])}",
        "base64url-unpadded": "decode "
        + base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
        "double-percent": "who pasted " + "".join(f"%25{ord(c):02X}" for c in secret),
        "inside-a-longer-base64": "blob " + _b64('{"user": "svc", "token": "' + secret + '"}'),
        "zero-width-inside-base64": "decode " + "\u200b".join(b64) + " now",
        "base64-of-percent": "decode " + _b64("".join(f"%{ord(c):02X}" for c in secret)),
        "mathematical-bold": "who pasted "
        + "".join(
            chr(0x1D400 + ord(c) - 65)
            if c.isupper()
            else chr(0x1D41A + ord(c) - 97)
            if c.islower()
            else chr(0x1D7CE + ord(c) - 48)
            for c in secret
        ),
        "strikethrough-marks": "who pasted " + "".join(c + "\u0336" for c in secret),
        # what did not until the rules' second round (the capital-I look-alikes, the
        # look-alike map before NFKC, combining marks, fillers spelled by percent-encoding,
        # glued, full-width, UTF-16, hex and nested encodings)
        "greek-capital-iota": "who pasted " + secret.replace("I", "\u0399"),
        "cyrillic-capital-i": "who pasted " + secret.replace("I", "\u0406"),
        "lunate-sigma-for-c": "who pasted " + secret.replace("c", "\u03f2"),
        "combining-acute": "who pasted " + "".join(c + "\u0301" for c in secret),
        "percent-encoded-hangul-filler": f"who pasted {secret[:half]}%E3%85%A4{secret[half:]}",
        "base64-in-a-url-path": f"GET https://vault.example/v1/token/{b64} returned 403",
        "base64-after-underscore": f"env TOKEN_B64_{b64} leaked",
        "base64-percent-encoded-in-a-query": f"GET /v1/login?token={quote(b64, safe='')} 403",
        "full-width-base64": f"decode {_full_width(b64)} now",
        "utf16-base64-powershell": f"powershell -enc {_b64(secret.encode('utf-16-le'))}",
        "hex": f"the token in hex is {secret.encode().hex()}",
        "base64-of-base64": f"decode {_b64(b64)} twice",
    }


def _variant_params() -> list[Any]:
    names = list(_variants("ZZZZIc2mP00000000xL4"))
    params = []
    for when in ("scrubbed", "on-write"):
        for name in names:
            params.append(pytest.param(name, when, id=f"{when}-{name}"))
    return params


@pytest.fixture(scope="module")
def spelled_log(database: DatabaseUrls) -> Iterator[dict[str, Any]]:
    """One redaction of a lesson holding the secret: every variant asked before it (the
    scrub's reach) and after it (the check on write)."""
    conn = connect(database.app)
    service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    secret = _secret()
    variants = _variants(secret)
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    for name, topic in variants.items():
        _log(service, tenant, f"scrubbed-{name}", topic)
    _log(service, tenant, "unrelated", UNRELATED)
    outcome = service.redact_entry(tenant, lesson, "a token was pasted", context())
    later = datetime.now(UTC) + timedelta(seconds=5)
    for name, topic in variants.items():
        _log(service, tenant, f"on-write-{name}", topic, at=later)
    yield {
        "readable": _readable(service, tenant),
        "variants": variants,
        "secret": secret,
        "outcome": outcome,
    }
    conn.close()


@pytest.mark.parametrize(("variant", "when"), _variant_params())
def test_a_spelling_of_the_secret_leaves_the_log(
    spelled_log: dict[str, Any], variant: str, when: str
) -> None:
    topic, _ = spelled_log["readable"][f"{when}-{variant}"]
    assert spelled_log["readable"]["unrelated"] == (UNRELATED, None)
    assert topic != spelled_log["variants"][variant]
    assert spelled_log["secret"] not in topic


# --- a crowd: what is filed while, or after, the redaction runs --------------------------


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a question filed between the scrub and the redaction's commit keeps the secret "
    "(log writes share the tenant lock; the digests are not visible until commit), and the "
    "receipt says 0 left",
)
def test_a_question_filed_while_the_redaction_runs_loses_the_secret(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import grandbo.memory.repository.redaction as redaction

    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    writer_conn = connect(database.app)
    writer = MemoryService(MemoryRepository(writer_conn), FakeEmbeddingProvider())
    keep_digests = redaction.keep_digests
    racer = threading.Thread(
        target=lambda: _log(
            writer, tenant, "racer", f"is {secret} revoked yet", at=datetime.now(UTC)
        )
    )

    def scrubbed_then_a_question(*args: Any) -> int:
        racer.start()
        racer.join(timeout=3)  # a log write that waited for the redaction would still wait
        return keep_digests(*args)

    monkeypatch.setattr(redaction, "keep_digests", scrubbed_then_a_question)
    try:
        outcome = service.redact_entry(tenant, lesson, "a token was pasted", context())
        racer.join(timeout=10)
    finally:
        writer_conn.close()
    assert outcome.receipt is not None
    assert outcome.receipt.left == 0
    topic, _ = _readable(service, tenant)["racer"]
    assert secret not in topic


def _log_as_older_code(
    conn: psycopg.Connection[Any], tenant: str, caller: str, topic: str, at: datetime
) -> None:
    """A writer of code older than migration 0040 (a rolling deploy): the 9-argument
    grandbo_log_retrieval, the database spelling the question alone."""
    conn.execute(
        "SELECT grandbo_log_retrieval(%s, %s, %s, NULL, %s, '[]'::jsonb, 1, true, 100000)",
        (tenant, at, caller, topic),
    )


# (a strict xfail until a redaction spelled the database's questions again itself)
def test_a_question_the_database_spelled_is_reached_or_the_receipt_says_so(
    service: MemoryService, tenant: str, app_conn: psycopg.Connection[Any]
) -> None:
    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    earlier = datetime.now(UTC) - timedelta(minutes=1)
    _log_as_older_code(app_conn, tenant, "legacy", f"decode {_b64(secret)} please", earlier)
    outcome = service.redact_entry(tenant, lesson, "a token was pasted", context())
    assert outcome.receipt is not None
    topic, _ = _readable(service, tenant)["legacy"]
    assert _b64(secret) not in topic or outcome.receipt.left > 0


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="after a redaction, an older writer's question is checked against the database's "
    "spelling only: its base64 spelling of the secret is kept",
)
def test_an_older_writers_question_after_the_redaction_is_checked(
    service: MemoryService, tenant: str, app_conn: psycopg.Connection[Any]
) -> None:
    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    service.redact_entry(tenant, lesson, "a token was pasted", context())
    later = datetime.now(UTC) + timedelta(seconds=5)  # asked after the redaction
    _log_as_older_code(app_conn, tenant, "verbatim", f"is {secret} still valid", later)
    _log_as_older_code(app_conn, tenant, "legacy", f"decode {_b64(secret)} please", later)
    readable = _readable(service, tenant)
    assert readable["verbatim"] == (REMOVED, None)  # what the database spells is checked
    assert readable["legacy"] == (REMOVED, None)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a verdict's note quoting the secret, filed after the redaction, is kept: notes "
    "have no check on write (only the next audit finds it)",
)
def test_a_note_filed_after_the_redaction_loses_the_secret(
    service: MemoryService, tenant: str
) -> None:
    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    other = service.record_entry(
        tenant, entry("Pool exhausted by retries", UNRELATED + " after retries"), context()
    ).entry.entry_id
    service.redact_entry(tenant, lesson, "a token was pasted", context())
    service.record_feedback(
        tenant,
        other,
        {"verdict": "helpful", "incident_id": "INC-B1", "note": f"the token {secret} again"},
        context(),
    )
    (verdict,) = service.repository.incident_verdicts(tenant, "INC-B1")
    assert verdict.note is None or secret not in verdict.note


# --- hostile listed strings and texts ----------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a listed 4-digit code removes unrelated questions whole: the spelling joins "
    "digits across separators (the address 10.4.0.52 spells 4052)",
)
def test_a_listed_short_code_leaves_unrelated_questions_alone(
    service: MemoryService, tenant: str
) -> None:
    lesson = service.record_entry(
        tenant,
        entry("Door code shared in chat", "The server room door code was shared in chat."),
        context(),
    ).entry.entry_id
    asked = "the pod at 10.4.0.52 is unreachable from the checkout service"
    _log(service, tenant, "unrelated", asked)
    outcome = service.redact_entry(tenant, lesson, "a door code", context(), also=["4052"])
    assert outcome.receipt is not None
    assert _readable(service, tenant)["unrelated"] == (asked, None)


def test_a_listed_string_of_hostile_bytes_is_refused_or_removed_never_a_crash(
    service: MemoryService, tenant: str
) -> None:
    from grandbo.errors import InvalidInputError

    lesson = service.record_entry(
        tenant,
        entry("Door code shared in chat", "The server room door code was shared in chat."),
        context(),
    ).entry.entry_id
    # none of these spells 4 letters or digits: each refused, nothing redacted
    for hostile in (["%%%%"], ["\u200b" * 50], ["a\u0301b\u0301c"], ["%"], ["_" * 10], ["%25" * 3]):
        with pytest.raises(InvalidInputError):
            service.redact_entry(tenant, lesson, "x", context(), also=hostile)
    with pytest.raises(InvalidInputError):
        service.redact_entry(tenant, lesson, "x", context(), also=["abcd"] * 21)
    with pytest.raises(InvalidInputError):
        service.redact_entry(tenant, lesson, "x", context(), also="abcd")
    assert service.repository.tombstone(tenant, lesson) is None
    # at the bounds: 20 strings of 500 characters, one of them expanding fifteenfold under
    # NFKC (U+FDFA), LIKE's wildcards and a lone surrogate's neighbours spelled away
    listed = ["\ufdfa" * 500, "%_%_" + "x1" * 10, "\\%\\_" + "y2" * 10] + [
        f"{n:04d}" + "z" * 490 for n in range(17)
    ]
    _log(service, tenant, "wild", "what does 100% of the pool_size mean for checkout")
    outcome = service.redact_entry(tenant, lesson, "codes", context(), also=listed)
    assert outcome.receipt is not None
    assert outcome.receipt.left == 0
    # the wildcards were not patterns: an unrelated question stays
    assert _readable(service, tenant)["wild"][0].startswith("what does 100%")


def test_an_entry_with_a_very_long_token_can_be_redacted(
    service: MemoryService, tenant: str
) -> None:
    blob = "kubeconfigData" + "Q2VydA1x" * 1010  # one pasted blob of 8094 characters
    lesson = service.record_entry(
        tenant,
        entry(
            "Kubeconfig pasted into the channel",
            f"The admin kubeconfig {blob} was pasted into the incident channel by mistake.",
        ),
        context(),
    ).entry.entry_id
    failure: Exception | None = None
    try:
        service.redact_entry(tenant, lesson, "a credential was pasted", context())
    except Exception as exc:  # what the API would answer 500 with
        failure = exc
    assert failure is None, repr(failure)
    assert service.repository.tombstone(tenant, lesson) is not None


# --- the check on write, made slow --------------------------------------------------------

# a valid question (4000 characters at most, 4 words at least) of U+FDFA, which NFKC spells
# as 15 letters each: its spelling is ~15 times as long as any other question's
_SWOLLEN = " ".join(["\ufdfa" * 19] * 100)  # 1999 characters, ~28,500 spelled


def _redacted_org(service: MemoryService, tenant: str) -> str:
    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    service.redact_entry(tenant, lesson, "a token was pasted", context())
    return secret


def test_logging_a_swollen_question_after_a_redaction_stays_fast(
    service: MemoryService, tenant: str
) -> None:
    _redacted_org(service, tenant)
    later = datetime.now(UTC) + timedelta(seconds=5)
    plain = ("checkout requests time out waiting for a database connection " * 40)[:1999]
    started = time.perf_counter()
    _log(service, tenant, "plain", plain, at=later)
    assert time.perf_counter() - started < 0.5  # a question as long, spelled as long
    started = time.perf_counter()
    _log(service, tenant, "swollen", _SWOLLEN, at=later)
    # its windows are checked over the first 8,000 spelled characters, each slice taken
    # once: well inside the role's 9 s bound (it took 8.6 s at 4,000 characters before)
    assert time.perf_counter() - started < 2.0


def test_one_organizations_swollen_question_does_not_drop_anothers(
    service: MemoryService, tenant: str, other_tenant: str, database: DatabaseUrls
) -> None:
    from grandbo.runtime.retrieval_writer import RetrievalWriter

    _redacted_org(service, tenant)

    def bounded() -> psycopg.Connection[Any]:
        # the role's 9 s statement bound, scaled down to this question's size (a 4000-char
        # one takes longer than 9 s on this machine)
        conn = connect(database.app)
        conn.execute("SET statement_timeout = '300ms'")
        return conn

    writer = RetrievalWriter(bounded, gather_s=0.5)
    at = datetime.now(UTC) + timedelta(seconds=5)

    def asked(who: str, caller: str, topic: str) -> RetrievalRecord:
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

    try:
        # the control: another organization's question alone is written under that bound
        writer.submit(asked(other_tenant, "alone", UNRELATED))
        assert writer.flush(5.0)
        assert _readable(service, other_tenant).get("alone") == (UNRELATED, None)
        # then beside the swollen one, in one batch
        writer.submit(asked(tenant, "k", _SWOLLEN))
        writer.submit(asked(other_tenant, "k", UNRELATED))
        assert writer.flush(10.0)
    finally:
        writer.close(0)
    assert _readable(service, other_tenant).get("k") == (UNRELATED, None)


# --- what is kept of a removed spelling ---------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a listed short code is recovered from its SHA-256 and the salt kept beside it "
    "(one dump, or the application role, and 10^4 hashes)",
)
def test_a_listed_code_cannot_be_recovered_from_what_the_redaction_keeps(
    service: MemoryService, tenant: str, app_conn: psycopg.Connection[Any]
) -> None:
    lesson = service.record_entry(
        tenant,
        entry("Door code shared in chat", "The server room door code was shared in chat."),
        context(),
    ).entry.entry_id
    service.redact_entry(tenant, lesson, "a door code", context(), also=["8351"])
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        row = app_conn.execute("SELECT salt FROM org_memory_spelling_salts").fetchone()
        assert row is not None
        salt = bytes(row[0])
        kept = {
            bytes(d)
            for (d,) in app_conn.execute(
                "SELECT digest FROM org_memory_redacted_spellings WHERE length = 4"
            ).fetchall()
        }
    started = time.perf_counter()
    recovered = [
        code for code in (f"{n:04d}" for n in range(10_000)) if spelling_digest(salt, code) in kept
    ]
    assert time.perf_counter() - started < 5
    assert recovered == []


def test_nothing_outside_the_logs_spellings_holds_a_spelling_in_clear(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    other = service.record_entry(
        tenant, entry("Pool exhausted by retries", UNRELATED + " after retries"), context()
    ).entry.entry_id
    _log(service, tenant, "asked", f"decode {_b64(secret)} please", "INC-B2")
    service.record_feedback(
        tenant,
        other,
        {"verdict": "helpful", "incident_id": "INC-B2", "note": f"key {secret} leaked"},
        context(),
    )
    service.redact_entry(tenant, lesson, "a token", context(actor="admin"), also=["8351x"])
    (verdict,) = service.repository.incident_verdicts(tenant, "INC-B2")
    assert verdict.note == REMOVED
    # every text-like column of every row of the organization, as the owner reads it
    tables = admin_conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
        " WHERE a.attname = 'tenant_id' AND c.relnamespace = 'public'::regnamespace"
        "   AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
    ).fetchall()
    dumped = []
    for (table,) in tables:
        rows = admin_conn.execute(
            psycopg.sql.SQL("SELECT t::text FROM {} t WHERE tenant_id = %s").format(
                psycopg.sql.Identifier(table)
            ),
            (tenant,),
        ).fetchall()
        dumped += [f"{table}: {r[0]}" for r in rows]
    text = "\n".join(dumped)
    assert "org_memory_redaction_receipts" in text
    for needle in (secret, spelling(secret), _b64(secret), "8351x"):
        assert needle.casefold() not in text.casefold(), needle


# --- another organization's rows, through the new owned paths -----------------------------


def _scoped(conn: psycopg.Connection[Any], tenant: str | None) -> None:
    conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant or "",))


def _as_app(
    conn: psycopg.Connection[Any], scope: str | None, *statements: tuple[str, Any]
) -> list[Any]:
    """The statements as the application role, in one transaction scoped to `scope`
    (None: unscoped); the last one's rows (its row count if it returns none)."""
    rows: list[Any] = []
    with conn.transaction():
        _scoped(conn, scope)
        for statement, params in statements:
            cur = conn.execute(statement, params)
            rows = cur.fetchall() if cur.description else [cur.rowcount]
    return rows


def test_the_owned_paths_reach_no_other_organization(
    service: MemoryService, tenant: str, other_tenant: str, app_conn: psycopg.Connection[Any]
) -> None:
    for org in (tenant, other_tenant):
        for n in range(3):
            _log(service, org, f"k{n}", f"{org} question {n} about the checkout pool")
    theirs = service.record_entry(
        other_tenant, entry("Pool exhausted by retries", UNRELATED + " after retries"), context()
    ).entry.entry_id
    service.record_feedback(
        other_tenant,
        theirs,
        {"verdict": "helpful", "incident_id": "INC-B3", "note": "their note"},
        context(),
    )
    (their_verdict,) = service.repository.incident_verdicts(other_tenant, "INC-B3")
    refused = psycopg.errors.InsufficientPrivilege
    reach = "SELECT count(*) FROM grandbo_log_reach(%s, %s::text[], '{}'::uuid[])"
    remove = "SELECT grandbo_remove_notes(%s, %s)"
    for scope, asked in ((tenant, other_tenant), (None, other_tenant), (None, "")):
        with pytest.raises(refused):
            _as_app(app_conn, scope, (reach, (asked, ["%"])))
    with pytest.raises(refused):
        _as_app(app_conn, tenant, (remove, (other_tenant, [their_verdict.verdict_id])))
    # every wildcard: its own organization's questions, no other's
    for patterns in (["%"], ["_%"], ["%%", "%_%"]):
        assert _as_app(app_conn, tenant, (reach, (tenant, patterns))) == [(3 * len(patterns),)]
    theirs_spelt = ["%" + other_tenant[2:] + "%"]  # what their questions' spellings hold
    assert _as_app(app_conn, tenant, (reach, (tenant, theirs_spelt))) == [(0,)]
    # another organization's verdict named: nothing removed
    assert _as_app(app_conn, tenant, (remove, (tenant, [their_verdict.verdict_id]))) == [(0,)]
    # the spellings' table, row-level security enabled but not forced: the policy holds
    spelt = "SELECT DISTINCT tenant_id FROM org_memory_retrieval_spellings"
    assert _as_app(app_conn, tenant, (spelt, ())) == [(tenant,)]
    assert _as_app(app_conn, None, (spelt, ())) == []
    rewrite = "UPDATE org_memory_retrieval_spellings SET spelled = 'x' WHERE tenant_id = %s"
    assert _as_app(app_conn, tenant, (rewrite, (other_tenant,))) == [0]
    # nor is the note's path open to the role directly (no UPDATE on the event log)
    with pytest.raises(refused):
        _as_app(
            app_conn,
            other_tenant,
            ("SELECT set_config('grandbo.removing_notes', %s, true)", (other_tenant,)),
            (
                'UPDATE org_memory_events SET payload = payload || \'{"note": "[redacted]"}\''
                " WHERE tenant_id = %s AND event_id = %s",
                (other_tenant, their_verdict.verdict_id),
            ),
        )
    (after,) = service.repository.incident_verdicts(other_tenant, "INC-B3")
    assert after.note == "their note"
    assert len(_readable(service, other_tenant)) == 3


def test_a_pattern_list_of_ten_thousand_is_bounded_by_the_statement_timeout(
    service: MemoryService, tenant: str, app_conn: psycopg.Connection[Any]
) -> None:
    for n in range(20):
        _log(service, tenant, f"k{n}", f"question {n} about the checkout pool")
    patterns = [f"%{n:05d}q%" for n in range(10_000)]
    with pytest.raises(psycopg.errors.QueryCanceled):
        _as_app(
            app_conn,
            tenant,
            ("SET LOCAL statement_timeout = '100ms'", ()),
            (
                "SELECT count(*) FROM grandbo_log_reach(%s, %s::text[], '{}'::uuid[])",
                (tenant, patterns),
            ),
        )


# --- the organization's life: a lake moved, a purge ---------------------------------------

NEW_TABLES = (
    "org_memory_retrieval_spellings",
    "org_memory_spelling_salts",
    "org_memory_redacted_spellings",
    "org_memory_note_removals",
    "org_memory_redaction_receipts",
)


def _with_everything(service: MemoryService, tenant: str) -> dict[str, Any]:
    """A redaction with a listed code and its receipt, a note removed by an admin, a
    question and its spellings: a row of the organization in each of 0040's tables."""
    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    other = service.record_entry(
        tenant, entry("Pool exhausted by retries", UNRELATED + " after retries"), context()
    ).entry.entry_id
    _log(service, tenant, "asked", UNRELATED, "INC-B4")
    service.record_feedback(
        tenant,
        other,
        {"verdict": "not_helpful", "incident_id": "INC-B4", "note": "the runbook 8351 was stale"},
        context(),
    )
    (verdict,) = service.repository.incident_verdicts(tenant, "INC-B4")
    service.remove_verdict_note(tenant, verdict.verdict_id, "a code in a note", context())
    service.redact_entry(tenant, lesson, "a token", context(), also=["8351x"])
    return {"secret": secret, "lesson": lesson, "other": other}


def test_a_purge_removes_the_rows_of_every_new_table(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    _with_everything(service, tenant)
    _with_everything(service, other_tenant)
    before = service.organization_rows(tenant)
    assert all(before[t] > 0 for t in NEW_TABLES), before
    theirs = service.organization_rows(other_tenant)
    deleted = service.purge_organization(tenant)
    assert all(deleted.get(t, 0) == before[t] for t in NEW_TABLES), deleted
    after = service.organization_rows(tenant)
    assert all(after[t] == 0 for t in NEW_TABLES), after
    assert service.organization_rows(other_tenant) == theirs


def test_a_lake_with_a_removed_note_moves_whole(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    made = _with_everything(service, tenant)
    lines: list[str] = []
    LakeTransfer(service).export(tenant, lines.append)
    # the code as a word: a random id's hex may hold the digits (1 run in ~100 did)
    assert re.search(r"(?<![0-9a-f])8351", "\n".join(lines)) is None
    assert made["secret"] not in "\n".join(lines)
    outcome = LakeTransfer(service).import_stream(other_tenant, read_stream(lines), rename=True)
    assert outcome.complete
    assert service.repository.verify_projection(other_tenant).mismatches == []
    (verdict,) = service.repository.incident_verdicts(other_tenant, "INC-B4")
    assert verdict.note == REMOVED
    # a second import changes nothing
    again = LakeTransfer(service).import_stream(other_tenant, read_stream(lines), rename=True)
    assert again.inserted == 0


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a moved lake keeps the tombstone but not the redacted spellings' digests: the "
    "organization it moved to logs a question spelling the secret as asked",
)
def test_a_moved_lake_still_checks_questions_for_the_redacted_secret(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    made = _with_everything(service, tenant)
    lines: list[str] = []
    LakeTransfer(service).export(tenant, lines.append)
    LakeTransfer(service).import_stream(other_tenant, read_stream(lines), rename=True)
    _log(
        service,
        other_tenant,
        "after-move",
        f"is {made['secret']} still valid",
        at=datetime.now(UTC) + timedelta(seconds=5),
    )
    assert _readable(service, other_tenant)["after-move"] == (REMOVED, None)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a note an admin removes while the redaction runs is counted in the receipt as "
    "found and left (removed 0, left 1), though nothing is left",
)
def test_a_note_removed_meanwhile_is_not_counted_as_left(
    service: MemoryService, tenant: str, database: DatabaseUrls
) -> None:
    secret = _secret()
    lesson = service.record_entry(tenant, _lesson(secret), context()).entry.entry_id
    other = service.record_entry(
        tenant, entry("Pool exhausted by retries", UNRELATED + " after retries"), context()
    ).entry.entry_id
    service.record_feedback(
        tenant,
        other,
        {"verdict": "helpful", "incident_id": "INC-B5", "note": f"the token {secret} leaked"},
        context(),
    )
    (verdict,) = service.repository.incident_verdicts(tenant, "INC-B5")
    admin = connect(database.app)
    outcome: list[Any] = []
    try:
        # the admin's removal of the note, its transaction not yet committed
        admin.execute("BEGIN")
        _scoped(admin, tenant)
        admin.execute("SELECT grandbo_remove_notes(%s, %s)", (tenant, [verdict.verdict_id]))
        redacting = threading.Thread(
            target=lambda: outcome.append(
                service.redact_entry(tenant, lesson, "a token was pasted", context())
            )
        )
        redacting.start()
        time.sleep(1.0)  # the redaction waits on the note's row
        admin.execute("COMMIT")
        redacting.join(timeout=10)
    finally:
        admin.close()
    (after,) = service.repository.incident_verdicts(tenant, "INC-B5")
    assert after.note == REMOVED
    receipt = outcome[0].receipt
    notes = {p.place: p for p in receipt.places}["verdict notes"]
    assert (notes.found, notes.removed, notes.left) in {(1, 1, 0), (0, 0, 0), (1, 0, 0)}
    assert receipt.left == 0
