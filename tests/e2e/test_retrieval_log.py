"""Issue 36, point 3: the retrieval log. A query that names its incident appears in
`POST /v1/admin/retrievals` for that incident with its topic and hits (ids, ranks and
confidences, never an entry's text); an organization sees only its own; the questions
memory could not answer are listed apart; a purge leaves no retrieval row, and the
sweeper forgets retrievals past their retention."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import psycopg

from grandbo.api.auth import mint_query_token
from grandbo.memory.domain.retrieval_log import RETRIEVAL_DAYS
from grandbo.runtime.retrieval_writer import RetrievalWriter

from .conftest import Gateway
from .test_incident_closed import TOPIC, incident_event

_LESSON = {
    "title": "Checkout pool exhausted by a retry storm",
    "summary": "Checkout requests time out because the database connection pool is exhausted "
    "by retries; capping retries with jittered back-off fixed it.",
    "service": "checkout",
}


def _rows(admin_conn: psycopg.Connection[Any], tenant: str) -> int:
    row = admin_conn.execute(
        "SELECT count(*) FROM org_memory_retrievals WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def _log(gateway: Gateway, tenant: str, **body: Any) -> dict[str, Any]:
    reply = gateway.admin(tenant, "POST", "/v1/admin/retrievals", body)
    assert reply.status == 200, reply.body
    return dict(reply.body)


def test_a_query_naming_its_incident_is_listed_under_it_with_ids_only(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    assert gateway.publish(incident_event(tenant)).status == 200
    gateway.drain()
    answer = gateway.query(tenant, {"topic": TOPIC, "incident_id": "INC-7"})
    assert answer.status == 200, answer.body
    assert gateway.query(tenant, {"topic": TOPIC}).status == 200  # no incident named
    page = _log(gateway, tenant, incident_id="INC-7")
    (logged,) = page["retrievals"]
    assert logged["topic"] == TOPIC
    assert logged["incident_id"] == "INC-7"
    assert logged["caller"] == gateway.keys[f"{tenant}-query"].key_id
    assert [h["entry_id"] for h in logged["hits"]] == [h["entry_id"] for h in answer.body["hits"]]
    assert [h["rank"] for h in logged["hits"]] == list(range(1, len(logged["hits"]) + 1))
    assert [h["confidence"] for h in logged["hits"]] == [
        h["confidence"] for h in answer.body["hits"]
    ]
    assert logged["latency_ms"] > 0
    # ids only: no entry's title or summary is kept in the log (the page's `entries` are
    # the entries as they stand when it is read: titles, never a summary)
    texts = [h["title"] for h in answer.body["hits"]] + [h["summary"] for h in answer.body["hits"]]
    assert not any(text in str(page["retrievals"]) for text in texts)
    assert not any(h["summary"] in str(page) for h in answer.body["hits"])
    # newest first, both queries; another organization sees none of them
    everything = _log(gateway, tenant)["retrievals"]
    assert [r["incident_id"] for r in everything] == [None, "INC-7"]
    assert _log(gateway, other_tenant)["retrievals"] == []


def test_the_questions_memory_could_not_answer_are_listed_apart(
    gateway: Gateway, tenant: str
) -> None:
    assert gateway.publish(incident_event(tenant)).status == 200
    gateway.drain()
    unknown = "the print spooler on the third floor jams whenever the badge reader reboots"
    assert gateway.query(tenant, {"topic": unknown, "incident_id": "INC-8"}).status == 200
    assert gateway.query(tenant, {"topic": TOPIC, "incident_id": "INC-8"}).status == 200
    unanswered = _log(gateway, tenant, unanswered=True)["retrievals"]
    assert [r["topic"] for r in unanswered] == [unknown]
    assert unanswered[0]["unanswered"] is True
    both = _log(gateway, tenant, incident_id="INC-8")["retrievals"]
    assert [r["unanswered"] for r in both] == [False, True]


def test_pages_follow_one_another_newest_first(gateway: Gateway, tenant: str) -> None:
    for n in range(5):
        topic = f"question number {n} about the checkout database connection pool running dry"
        assert gateway.query(tenant, {"topic": topic}).status == 200
    first = _log(gateway, tenant, limit=2)
    second = _log(gateway, tenant, limit=2, before=first["next"])
    third = _log(gateway, tenant, limit=2, before=second["next"])
    topics = [r["topic"] for page in (first, second, third) for r in page["retrievals"]]
    assert [t.split()[2] for t in topics] == ["4", "3", "2", "1", "0"]
    assert third["next"] is None


def test_a_purge_leaves_no_retrieval_and_the_sweeper_forgets_old_ones(
    gateway: Gateway, tenant: str, other_tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    for who in (tenant, other_tenant):
        assert gateway.query(who, {"topic": TOPIC, "incident_id": "INC-9"}).status == 200
    gateway.runtime.retrieval_writer.flush()
    assert _rows(admin_conn, tenant) == 1
    # an organization that only ever queried is still visited by the sweeper
    admin_conn.execute(
        "UPDATE org_memory_retrievals SET at = now() - make_interval(days => %s)"
        " WHERE tenant_id = %s",
        (RETRIEVAL_DAYS + 1, other_tenant),
    )
    assert gateway.door("/local/backfill", b"{}").status == 200
    assert _rows(admin_conn, other_tenant) == 0
    assert _rows(admin_conn, tenant) == 1  # within its retention: kept
    purged = gateway.runtime.service().repository.purge_organization(tenant)
    assert purged["org_memory_retrievals"] == 1
    assert _rows(admin_conn, tenant) == 0


def test_the_writer_never_fails_a_query_and_counts_what_it_could_not_write() -> None:
    from grandbo.errors import StoreUnavailableError
    from grandbo.memory.domain.retrieval_log import RetrievalRecord

    def unreachable() -> Any:
        raise StoreUnavailableError("connection refused")

    writer = RetrievalWriter(unreachable)
    record = RetrievalRecord(
        tenant_id="acme",
        at=datetime.now(UTC),
        caller="k",
        incident_id=None,
        topic="t",
        hits=[],
        latency_ms=1.0,
        no_precedent=True,
    )
    writer.submit(record)  # returns at once
    assert writer.flush(5)
    assert (writer.written, writer.dropped) == (0, 1)


def test_in_lambda_a_query_answers_only_once_its_retrieval_is_written(
    database: Any, tenant: str, admin_conn: psycopg.Connection[Any], monkeypatch: Any
) -> None:
    """Lambda freezes a container as soon as it answered, and may reclaim it frozen: there
    the retrieval is written before the answer (locally it is gathered for 0.2 s)."""
    from grandbo.embedding.fake import FakeEmbeddingProvider
    from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "grandbo-query")
    runtime = LambdaRuntime(
        LambdaEnvironment.model_validate(
            {"DATABASE_URL": database.app, "GRANDBO_EMBEDDING_PROVIDER": "fake"}
        ),
        provider=FakeEmbeddingProvider(),
    )
    try:
        runtime.query_org_memory(tenant, TOPIC, caller="k", incident_id="INC-L")
        assert _rows(admin_conn, tenant) == 1  # no flush: written before it answered
    finally:
        runtime.close()


def test_an_organization_whose_agents_keep_asking_can_still_be_purged(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """The log grows with every query; the purge's confirmation is not about it (a purge
    requested while agents ask stays confirmable), and what was asked before the purge
    is gone after it, not written after it."""
    asked = gateway.admin(tenant, "POST", "/v1/admin/purge", {"organization": tenant})
    assert asked.status == 200, asked.body
    assert gateway.query(tenant, {"topic": TOPIC, "incident_id": "INC-P"}).status == 200
    done = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/purge/confirmation",
        {"confirmation": asked.body["confirmation"]},
    )
    assert done.status == 200, done.body
    gateway.runtime.retrieval_writer.flush()
    assert _rows(admin_conn, tenant) == 0
    registered = admin_conn.execute(
        "SELECT count(*) FROM org_memory_tenants WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert registered == (0,)


def _record(tenant: str, topic: str, at: datetime | None = None) -> Any:
    from grandbo.memory.domain.retrieval_log import RetrievalRecord

    return RetrievalRecord.model_construct(
        tenant_id=tenant,
        at=at or datetime.now(UTC),
        caller="k",
        incident_id=None,
        topic=topic,
        hits=[],
        latency_ms=1.0,
        no_precedent=True,
    )


def test_a_refused_retrieval_costs_only_itself(
    database: Any, tenant: str, other_tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    from grandbo.storage.connections import connect

    writer = RetrievalWriter(lambda: connect(database.app), gather_s=0.5)
    for record in (
        _record(tenant, "the first question, good"),
        _record(tenant, "x" * 8001),  # over the table's bound: refused by the server
        _record(other_tenant, "another organization's question, good"),
    ):
        writer.submit(record)
    assert writer.flush(10)
    writer.close()
    assert (writer.written, writer.dropped) == (2, 1)
    assert (_rows(admin_conn, tenant), _rows(admin_conn, other_tenant)) == (1, 1)


def test_an_incident_id_the_log_could_not_store_is_refused_on_every_path(
    gateway: Gateway, tenant: str
) -> None:
    import pytest

    from grandbo.errors import InvalidInputError

    for bad in ("INC\x00", "INC\ud800", "", "x" * 201):
        with pytest.raises(InvalidInputError, match="incident_id"):
            gateway.runtime.query_org_memory(tenant, TOPIC, caller="mcp", incident_id=bad)
        assert gateway.query(tenant, {"topic": TOPIC, "incident_id": bad}).status in (400, 422)


def test_retrievals_asked_at_the_same_moment_are_all_paged(
    database: Any, gateway: Gateway, tenant: str
) -> None:
    from grandbo.memory.repository.retrievals import RetrievalLog
    from grandbo.storage.connections import connect

    moment = datetime.now(UTC)
    with connect(database.app) as conn:
        RetrievalLog(conn).log_retrievals([_record(tenant, f"q{n}", moment) for n in range(3)])
    first = _log(gateway, tenant, limit=2)
    second = _log(gateway, tenant, limit=2, before=first["next"])
    topics = [r["topic"] for page in (first, second) for r in page["retrievals"]]
    assert sorted(topics) == ["q0", "q1", "q2"]
    bad = gateway.admin(tenant, "POST", "/v1/admin/retrievals", {"before": "yesterday"})
    assert bad.status == 400
    assert bad.body["field"] == "before"


def test_an_organization_sets_how_long_its_retrievals_are_kept(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    assert gateway.admin(tenant, "GET", "/v1/admin/settings").body["retrieval_days"] == 30
    set_ = gateway.admin(tenant, "POST", "/v1/admin/settings", {"retrieval_days": 7})
    assert set_.status == 200, set_.body
    assert set_.body["retrieval_days"] == 7
    for bad in (0, 3651, "7", True):
        refused = gateway.admin(tenant, "POST", "/v1/admin/settings", {"retrieval_days": bad})
        assert refused.status in (400, 422), (bad, refused.body)
    for n in range(2):
        assert gateway.query(tenant, {"topic": f"{TOPIC} ({n})"}).status == 200
    gateway.runtime.retrieval_writer.flush()
    admin_conn.execute(  # one asked 8 days ago, one 6: only the first is past 7
        "UPDATE org_memory_retrievals SET at = now() - make_interval(days => CASE"
        " WHEN topic LIKE '%%(0)' THEN 8 ELSE 6 END) WHERE tenant_id = %s",
        (tenant,),
    )
    assert gateway.door("/local/backfill", b"{}").status == 200
    (left,) = _log(gateway, tenant)["retrievals"]
    assert left["topic"].endswith("(1)")


def test_an_incident_reads_back_with_its_hits_entries_and_verdicts(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    """What the console's incident page reads: each hit's entry as it stands now (a
    redacted one with no title), the incident's verdicts with their notes, and the list of
    incidents with how many questions each asked and how many went unanswered."""
    created = gateway.admin(tenant, "POST", "/v1/admin/entries", _LESSON)
    assert created.status == 201, created.body
    entry_id = created.body["entry"]["entry_id"]
    gateway.drain()
    asked = "checkout requests time out because the database connection pool is exhausted"
    answer = gateway.query(tenant, {"topic": asked, "incident_id": "INC-40"})
    assert [hit["entry_id"] for hit in answer.body["hits"]] == [entry_id]
    unknown = "the kafka consumer group rebalanced endlessly after a broker upgrade"
    gateway.query(tenant, {"topic": unknown, "incident_id": "INC-40"})
    gateway.query(other_tenant, {"topic": asked, "incident_id": "INC-40"})
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    verdict = {"verdict": "misleading", "incident_id": "INC-40", "note": "it was DNS, not the pool"}
    reply = gateway.request(
        "POST",
        f"/v1/memory/entries/{entry_id}/feedback",
        json.dumps(verdict).encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert reply.status in (200, 201), reply.body

    page = _log(gateway, tenant, incident_id="INC-40")
    assert [r["topic"] for r in page["retrievals"]] == [unknown, asked]
    assert page["entries"][entry_id] == {"title": _LESSON["title"], "status": "active"}
    [given] = page["verdicts"]
    assert given["entry_id"] == entry_id
    assert given["verdict"] == "misleading"
    assert given["note"] == "it was DNS, not the pool"

    incidents = gateway.admin(tenant, "POST", "/v1/admin/retrievals/incidents", {})
    assert incidents.status == 200, incidents.body
    [incident] = incidents.body["incidents"]
    assert (incident["incident_id"], incident["asked"], incident["unanswered"]) == ("INC-40", 2, 1)
    # another organization's question of the same incident id is its own
    theirs = gateway.admin(other_tenant, "POST", "/v1/admin/retrievals/incidents", {})
    assert [i["asked"] for i in theirs.body["incidents"]] == [1]

    redacted = gateway.admin(
        tenant, "POST", f"/v1/admin/entries/{entry_id}/redaction", {"reason": "a name in it"}
    )
    assert redacted.status == 200, redacted.body
    page = _log(gateway, tenant, incident_id="INC-40")
    assert page["entries"][entry_id] == {"title": None, "status": "redacted"}
    assert _LESSON["title"] not in json.dumps(page)


def test_unanswered_questions_are_grouped_by_similar_topics(gateway: Gateway, tenant: str) -> None:
    asked = [
        "the kafka consumer group rebalanced endlessly after a broker upgrade",
        "kafka consumer group rebalancing loop during the broker rolling upgrade",
        "certificate expired on the internal payments gateway",
        "the consumer group of kafka kept rebalancing",
    ]
    for n, topic in enumerate(asked):
        assert gateway.query(tenant, {"topic": topic, "incident_id": f"INC-{n}"}).status == 200
    page = _log(gateway, tenant, unanswered=True)
    groups = page["groups"]
    assert [len(g["retrieval_ids"]) for g in groups] == [3, 1]
    assert {"kafka", "consumer", "group"} <= set(groups[0]["words"])
    assert sorted(groups[0]["incidents"]) == ["INC-0", "INC-1", "INC-3"]
    by_id = {r["retrieval_id"]: r["topic"] for r in page["retrievals"]}
    assert [by_id[i] for i in groups[1]["retrieval_ids"]] == [asked[2]]


def test_a_closed_writer_writes_what_it_held_and_opens_nothing_after(
    database: Any, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """Closing a runtime closes its writer: a retrieval still gathering is written first,
    and one handed over later is dropped, with no connection opened for it (the writer's
    thread used to reconnect after the runtime had closed, one connection left behind
    each time: 72 of them by the end of the test suite)."""
    from grandbo.storage.connections import connect

    opened: list[psycopg.Connection[Any]] = []

    def counted() -> psycopg.Connection[Any]:
        opened.append(connect(database.app))
        return opened[-1]

    writer = RetrievalWriter(counted, gather_s=0.5)
    writer.submit(_record(tenant, "asked just before the runtime closed"))
    writer.close()
    assert (writer.written, _rows(admin_conn, tenant)) == (1, 1)
    writer.submit(_record(tenant, "asked after it closed"))
    assert writer.flush(2)
    assert (writer.written, writer.dropped) == (1, 1)
    assert len(opened) == 1
    assert opened[0].closed


def test_a_redaction_over_http_removes_every_spelling_from_the_log_and_its_pages(
    gateway: Gateway, tenant: str
) -> None:
    """Issue 52: questions asked through the query door spelling a secret otherwise
    (full-width, split, base64, a listed code), then the redaction over the admin API
    with `also_remove`: the receipt comes back, and neither the log's API pages nor the
    console's incident and unanswered pages (rendered from them) hold any spelling."""
    import base64

    from grandbo.console.base import CSRF_FIELD, _environment
    from grandbo.text.spelling import spelling, spellings

    secret = "Zq7vK2mP9xL4tR8w"
    code = "k7q2zx"
    lesson = {
        **_LESSON,
        "summary": _LESSON["summary"] + f" The pool's password {secret} was pasted in chat.",
    }
    created = gateway.admin(tenant, "POST", "/v1/admin/entries", lesson)
    assert created.status == 201, created.body
    entry_id = created.body["entry"]["entry_id"]
    wide = "".join(chr(ord(c) + 0xFEE0) for c in secret)
    asked = [
        ({"topic": f"who pasted {wide} into chat", "incident_id": "INC-21"}),
        ({"topic": f"who pasted {secret[:8]} {secret[8:]} into chat"}),
        ({"topic": f"decode {base64.b64encode(secret.encode()).decode()} for me"}),
        ({"topic": f"door code {code} refused at the loading dock", "incident_id": "INC-21"}),
    ]
    for body in asked:
        assert gateway.query(tenant, body).status == 200
    assert gateway.runtime.retrieval_writer.flush()

    path = f"/v1/admin/entries/{entry_id}/redaction"
    reply = gateway.admin(
        tenant, "POST", path, {"reason": "a password was pasted", "also_remove": [code]}
    )
    assert reply.status == 200, reply.body
    receipt = reply.body["receipt"]
    (questions,) = [p for p in receipt["places"] if p["place"] == "retrieval log: questions"]
    assert questions["found"] >= 4
    assert questions["left"] == 0
    short = gateway.admin(tenant, "POST", path, {"reason": "again", "also_remove": ["ab"]})
    assert short.status == 400, short.body  # named, refused before anything is read
    assert short.body["field"] == "also_remove"

    everything = _log(gateway, tenant)
    incident = _log(gateway, tenant, incident_id="INC-21")
    unanswered = _log(gateway, tenant, unanswered=True)
    spelt = [spelling(secret), code]
    for page in (everything, incident, unanswered):
        for row in page["retrievals"]:
            text = spellings(row["topic"], row["incident_id"])
            assert not [s for s in spelt if s in text], row["topic"]
    assert len(everything["retrievals"]) == len(asked)
    common = {
        "csrf": "c" * 32,
        "person": "ana@example.com",
        "role": "admin",
        "operator_key": "ops",
        "via": "key",
        "csrf_field": CSRF_FIELD,
        "organization": tenant,
        "api": "http://127.0.0.1",
        "done": None,
    }
    environment = _environment()
    pages = [
        environment.get_template("incident.html").render(
            **common,
            path="/incidents",
            incident_id="INC-21",
            page=incident,
            verdicts={},
            unserved=[],
        ),
        environment.get_template("unanswered.html").render(
            **common,
            path="/unanswered",
            total=len(unanswered["retrievals"]),
            groups=[{"words": [], "incidents": [], "questions": unanswered["retrievals"]}],
            next_query=None,
        ),
    ]
    for html in pages:
        assert "[redacted]" in html
        assert not [s for s in spelt if s in spellings(html)]
