"""The learned graph at its edges (issue 27, red team): moments UTC cannot hold, renames
that meet on one edge, a node listed twice, a service that came back."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import InvalidEventError, InvalidInputError
from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.incidents import parse_incident_closed
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.topology.learned.graph import incident_node_id
from grandbo.topology.model import Namespace, TopologyBatch
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

from .helpers import context, entry
from .test_lake_export_import import second_store
from .test_learned_graph import (
    T0,
    TOPIC,
    Clock,
    affected_by,
    clock,
    correlations,
    deliver,
    incident,
    learned_rows,
    memory,
    memory_on,
    topology_of,
)

__all__ = ["clock", "memory", "second_store"]  # the fixtures, shared


def test_a_closing_moment_before_year_one_in_utc_is_refused(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """0001-01-01T00:00:00+14:00 is 31 December of 1 BC in UTC: stored as the learned
    graph's valid_at, every read of the node (staleness of each hit about its service,
    every scoped query) failed to load it (psycopg DataError: a 500), for good."""
    detail = incident(tenant, "INC-1", service="checkout", findings=[("f1", "payments-db")])
    detail["closed_at"] = "0001-01-01T00:00:00+14:00"
    with pytest.raises(InvalidEventError, match="closed_at"):
        parse_incident_closed(detail)
    # nor is one UTC holds, outside the plausible range (issue 34, point 8: year 1 made
    # the nodes valid since antiquity, in every `as_of` replay), nor year 9999
    for implausible in (
        "0001-01-01T00:00:00-14:00",
        "1999-12-31T23:59:59Z",
        "9999-01-01T00:00:00Z",
    ):
        detail["closed_at"] = implausible
        with pytest.raises(InvalidEventError, match="closed_at"):
            parse_incident_closed(detail)
    # one in the range is taken as it is, one without a zone as UTC
    detail["closed_at"] = "2026-11-01T00:00:00-14:00"
    deliver(memory, detail)
    detail = incident(tenant, "INC-2", service="checkout", findings=[("f1", "ledger")])
    detail["closed_at"] = "2026-11-02T10:00:00"
    deliver(memory, detail)
    result = memory.query_org_memory(tenant, TOPIC, service="checkout", scope="correlated")
    assert result.metadata.services_in_scope == ["checkout", "ledger", "payments-db"]
    assert memory.stale_entries(tenant) == []
    assert memory.verify_learned_graph(tenant) == (4, [])
    # nothing the learned graph holds is valid from before 2000 or from the future
    with admin_conn.cursor() as cur:
        cur.execute(
            "SELECT min(valid_at), max(valid_at) FROM topology_nodes WHERE tenant_id = %s",
            (tenant,),
        )
        earliest, latest = cur.fetchone() or (None, None)
    assert earliest is not None
    assert earliest.year >= 2000
    assert latest <= datetime.now(UTC)


def test_a_rename_onto_a_name_the_incident_also_affected_counts_it_once(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """During a migration an incident names both the old and the new service; the batch
    that says the new one replaces the old carried the old one's correlation onto the
    new one's and added the counts: one incident counted twice, which rebuild --verify
    reported as drift no rebuild could mend."""
    topology = topology_of(memory)
    topology.record(
        tenant,
        {
            "nodes": [
                {"node_type": "Service", "external_id": name}
                for name in ("checkout", "payments", "payments-v2")
            ]
        },
    )
    deliver(
        memory,
        incident(
            tenant,
            "INC-1",
            service="checkout",
            findings=[("f1", "payments"), ("f2", "payments-v2")],
        ),
    )
    deliver(memory, incident(tenant, "INC-2", service="checkout", findings=[("f1", "payments")]))
    topology.record(
        tenant,
        {"nodes": [{"node_type": "Service", "external_id": "payments-v2", "replaces": "payments"}]},
    )
    # INC-1 and INC-2 affected checkout and payments(-v2): two incidents, not three
    assert correlations(admin_conn, tenant) == {("checkout", "payments-v2"): 2}
    assert affected_by(admin_conn, tenant, "INC-1") == {"checkout", "payments", "payments-v2"}
    affects = admin_conn.execute(
        "SELECT observed_count FROM topology_edges WHERE tenant_id = %s"
        " AND edge_type = 'AFFECTS' AND invalid_at IS NULL",
        (tenant,),
    ).fetchall()
    assert {n for (n,) in affects} == {1}
    assert memory.verify_learned_graph(tenant) == (5, [])


def test_two_renames_of_one_batch_meeting_on_one_pair_are_recorded(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """a -> a2 and b -> b2 in one batch, a2 already correlated with b: two carried rows
    landed on (a2, b2) in one INSERT ... ON CONFLICT, which PostgreSQL refuses
    (CardinalityViolation): the batch was a 500 and nothing was renamed."""
    topology = topology_of(memory)
    topology.record(
        tenant,
        {"nodes": [{"node_type": "Service", "external_id": name} for name in ("a", "a2", "b")]},
    )
    deliver(memory, incident(tenant, "INC-1", service="a", findings=[("f1", "b")]))
    deliver(memory, incident(tenant, "INC-2", service="a2", findings=[("f1", "b")]))
    counts = topology.record(
        tenant,
        {
            "nodes": [
                {"node_type": "Service", "external_id": "a2", "replaces": "a"},
                {"node_type": "Service", "external_id": "b2", "replaces": "b"},
            ]
        },
    )
    assert counts["nodes_replaced"] == 2
    assert correlations(admin_conn, tenant) == {("a2", "b2"): 2}
    assert memory.verify_learned_graph(tenant) == (4, [])


def test_a_node_listed_twice_replaces_what_its_last_listing_says(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """One node listed twice, replacing a then b: both were retired and carried onto it
    (two AFFECTS of one incident onto one key: CardinalityViolation, a 500), though the
    node was stored as the last listing says (replaces b)."""
    topology = topology_of(memory)
    topology.record(
        tenant,
        {"nodes": [{"node_type": "Service", "external_id": n} for n in ("checkout", "a", "b")]},
    )
    deliver(
        memory, incident(tenant, "INC-1", service="checkout", findings=[("f1", "a"), ("f2", "b")])
    )
    counts = topology.record(
        tenant,
        {
            "nodes": [
                {"node_type": "Service", "external_id": "c", "replaces": "a"},
                {"node_type": "Service", "external_id": "c", "replaces": "b"},
            ]
        },
    )
    assert counts["nodes_replaced"] == 1
    assert correlations(admin_conn, tenant) == {
        ("a", "c"): 1,
        ("a", "checkout"): 1,
        ("c", "checkout"): 1,
    }
    hits = memory.query_org_memory(tenant, TOPIC).hits
    stale = {h.service: h.staleness for h in hits if h.service in ("a", "b")}
    assert stale["a"] is None
    assert stale["b"] is not None
    assert stale["b"].changes[0].replaced_by == "c"


def test_a_service_that_came_back_under_a_reclosed_incident_still_verifies(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], clock: Clock, tenant: str
) -> None:
    """checkout retired by a sync (its learned edges closed) and listed again by the
    next; the incident that had affected it is delivered again with one more finding.
    The graph re-drew checkout's edges from the incident's moment, overlapping the
    intervals the retirement closed (a replay of that time found db twice in the
    correlated scope), and rebuild --verify added the intervals' counts: a MISMATCH."""
    topology = topology_of(memory)
    topology.record(
        tenant,
        {
            "nodes": [
                {"node_type": "Service", "external_id": n} for n in ("checkout", "db", "cache")
            ]
        },
        sync=True,
    )
    first = incident(tenant, "INC-1", service="checkout", findings=[("f1", "db")])
    deliver(memory, first)
    clock.now += timedelta(days=1)
    topology.record(
        tenant,
        {"nodes": [{"node_type": "Service", "external_id": n} for n in ("db", "cache")]},
        sync=True,
    )
    retired_at = clock.now
    clock.now += timedelta(days=1)
    topology.record(
        tenant,
        {
            "nodes": [
                {"node_type": "Service", "external_id": n} for n in ("checkout", "db", "cache")
            ]
        },
        sync=True,
    )
    clock.now += timedelta(days=1)
    deliver(
        memory,
        incident(tenant, "INC-1", service="checkout", findings=[("f1", "db"), ("f2", "cache")]),
    )
    assert memory.verify_learned_graph(tenant) == (3, [])
    # no moment sees two intervals of one edge
    overlapping = admin_conn.execute(
        "SELECT count(*) FROM topology_edges a JOIN topology_edges b"
        " ON a.tenant_id = b.tenant_id AND a.source_key = b.source_key"
        " AND a.edge_type = b.edge_type AND a.target_key = b.target_key AND a.id < b.id"
        " WHERE a.tenant_id = %s AND a.valid_at < coalesce(b.invalid_at, 'infinity')"
        " AND b.valid_at < coalesce(a.invalid_at, 'infinity')",
        (tenant,),
    ).fetchone()
    assert overlapping == (0,)
    before = memory.query_org_memory(
        tenant, TOPIC, service="checkout", scope="correlated", as_of=retired_at - timedelta(hours=1)
    )
    assert before.metadata.services_in_scope == ["checkout", "cache", "db"]


def test_a_lake_moved_to_another_store_keeps_what_its_incidents_taught(
    memory: MemoryService,
    admin_conn: psycopg.Connection[Any],
    clock: Clock,
    tenant: str,
    second_store: tuple[DatabaseUrls, MemoryService, psycopg.Connection[Any]],
) -> None:
    """The symptom's service (the incident's own) was in the learned graph only, never in
    the events: an import (or a rebuild) drew AFFECTS to the findings' services alone,
    so the correlation between the symptom and its cause, what scope correlated asked
    from the symptom finds, did not survive the move; and the edges began when the
    events were recorded, not when the incidents closed."""
    for number, day in (("1", 0), ("2", 1)):
        deliver(
            memory,
            incident(
                tenant,
                f"INC-{number}",
                service="checkout",
                findings=[("f1", "payments-db")],
                closed_at=T0 + timedelta(days=day),
            ),
        )
    source = learned_rows(admin_conn, tenant)
    lines: list[str] = []
    LakeTransfer(memory).export(tenant, lines.append)
    urls, _, owner = second_store
    target_conn = connect(urls.app)
    try:
        target = memory_on(target_conn, clock)
        assert LakeTransfer(target).import_stream(tenant, read_stream(lines)).complete
        assert learned_rows(owner, tenant)["edges"] == source["edges"]
        result = target.query_org_memory(tenant, TOPIC, service="checkout", scope="correlated")
        assert result.metadata.services_in_scope == ["checkout", "payments-db"]
        assert target.verify_learned_graph(tenant) == (4, [])
    finally:
        target_conn.close()


def test_a_batch_cannot_claim_retire_or_replace_an_incident_node(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], clock: Clock, tenant: str
) -> None:
    """The learned namespace is written by incidents only, but a batch naming an
    incident's node (its digest is no secret) claimed it for the topology, so the next
    sync retired it and closed its AFFECTS; the incident delivered again with one more
    finding then drew them anew and counted its correlation a second time. A batch node
    replacing it closed it the same way and carried its edges onto a node of its own."""
    topology = topology_of(memory)
    deliver(memory, incident(tenant, "INC-1", service="checkout", findings=[("f1", "db")]))
    node = {"node_type": "Incident", "external_id": incident_node_id("INC-1")}
    batch = TopologyBatch.model_validate(
        {"nodes": [node, {"node_type": "Service", "external_id": "db"}]}
    )
    with pytest.raises(InvalidInputError, match="learned graph"):
        topology.record(tenant, batch)
    # and were one let in below the service, it would not claim the node
    topology.repository.upsert(tenant, Namespace.TOPOLOGY, batch.nodes, [], clock.now)
    topology.record(tenant, {"nodes": [{"node_type": "Service", "external_id": "db"}]}, sync=True)
    with pytest.raises(InvalidInputError, match="incident"):
        topology.record(
            tenant,
            {
                "nodes": [
                    {"node_type": "Incident", "external_id": "x", "replaces": node["external_id"]}
                ]
            },
        )
    # nor list an incident's node before the incident comes (its id is a digest of a
    # guessable one), which would make it the topology's for its syncs to retire
    with pytest.raises(InvalidInputError, match="learned graph") as refused:
        topology.record(
            tenant,
            {"nodes": [{"node_type": "Incident", "external_id": incident_node_id("INC-2")}]},
        )
    assert refused.value.field == "nodes.0.external_id"
    clock.now += timedelta(days=1)
    deliver(
        memory,
        incident(tenant, "INC-1", service="checkout", findings=[("f1", "db"), ("f2", "cache")]),
    )
    assert affected_by(admin_conn, tenant, "INC-1") == {"cache", "checkout", "db"}
    assert correlations(admin_conn, tenant) == {
        ("cache", "checkout"): 1,
        ("cache", "db"): 1,
        ("checkout", "db"): 1,
    }
    closed = admin_conn.execute(
        "SELECT count(*) FROM topology_edges WHERE tenant_id = %s AND invalid_at IS NOT NULL",
        (tenant,),
    ).fetchone()
    assert closed == (0,)
    assert memory.verify_learned_graph(tenant) == (3, [])


def test_a_redacted_incident_id_cannot_be_found_by_guessing_its_digest(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """The Incident node is keyed by sha256 of the incident id, unsalted: an id of the
    platform's shape (INC-1042) is found by hashing the few thousand candidates, so the
    redacted entry's incident, and which services it affected, stayed readable. Once no
    event names the incident any more, its node takes an id of its own; while one does
    (an entry of it not redacted), the digest still joins them."""

    def guessed() -> list[str]:
        digests = {incident_node_id(f"INC-{n}"): f"INC-{n}" for n in range(10_000)}
        rows = admin_conn.execute(
            "SELECT DISTINCT external_id FROM topology_nodes"
            " WHERE tenant_id = %s AND external_id = ANY(%s)",
            (tenant, list(digests)),
        ).fetchall()
        return sorted(digests[external_id] for (external_id,) in rows)

    deliver(memory, incident(tenant, "INC-1042", service="checkout", findings=[("f1", "db")]))
    deliver(memory, incident(tenant, "INC-7", service="search", findings=[("f1", "index")]))
    deliver(memory, incident(tenant, "INC-7", service="search", findings=[("f2", "cache")]))
    entries = admin_conn.execute(
        "SELECT entry_id, incident_id FROM org_memory_entries WHERE tenant_id = %s"
        " ORDER BY created_at",
        (tenant,),
    ).fetchall()
    before = correlations(admin_conn, tenant)
    assert guessed() == ["INC-1042", "INC-7"]
    for entry_id, _ in entries[:2]:  # INC-1042's entry, and one of INC-7's
        memory.redact_entry(tenant, entry_id, "legal hold", context())
    assert guessed() == ["INC-7"]  # still named by its other entry's events
    # what the incidents taught stays, under a name of no one's
    assert correlations(admin_conn, tenant) == before
    assert affected_by(admin_conn, tenant, "INC-7") == {"cache", "index", "search"}
    assert memory.verify_learned_graph(tenant) == (2, [])
    # the same incident redelivered is a no-op still
    deliver(memory, incident(tenant, "INC-1042", service="checkout", findings=[("f1", "db")]))
    assert correlations(admin_conn, tenant) == before


def test_a_retired_service_is_not_renamed_into_a_sibling_it_lived_beside(
    memory: MemoryService, clock: Clock, tenant: str
) -> None:
    """A monorepo of two services (one owner and repo, both listed by the first sync):
    the sync that retires one said it was renamed to the other (the only current node of
    its owner and repo that appeared no earlier than it), and every scoped query for the
    other searched the retired one's lessons as its own."""
    topology = topology_of(memory)

    def node(name: str) -> dict[str, Any]:
        return {
            "node_type": "Service",
            "external_id": name,
            "properties": {"owner": "team-stock", "repo": "git/mono"},
        }

    topology.record(tenant, {"nodes": [node("stock-api"), node("stock-worker")]}, sync=True)
    for name in ("stock-api", "stock-worker"):
        memory.record_entry(
            tenant,
            entry(
                f"Pool exhausted on {name}",
                f"{name} timed out: the database connection pool was exhausted",
                service=name,
            ),
            context(),
        )
    clock.now += timedelta(days=1)
    topology.record(tenant, {"nodes": [node("stock-api")]}, sync=True)
    hits = memory.query_org_memory(tenant, TOPIC, limit=10).hits
    changes = {h.service: h.staleness.changes[0].kind for h in hits if h.staleness is not None}
    assert changes == {"stock-worker": "retired"}
    scoped = memory.query_org_memory(tenant, TOPIC, service="stock-api", scope="dependencies")
    assert scoped.metadata.services_in_scope == ["stock-api"]
    # a rename in one sync (a new node of the same owner and repo) still is one
    clock.now += timedelta(days=1)
    topology.record(tenant, {"nodes": [node("stock-service")]}, sync=True)
    hits = memory.query_org_memory(tenant, TOPIC, limit=10).hits
    renamed = {
        h.service: h.staleness.changes[0].replaced_by for h in hits if h.staleness is not None
    }
    assert renamed == {"stock-api": "stock-service", "stock-worker": None}


def test_a_redaction_racing_a_new_finding_of_its_incident_keeps_the_digest(
    database: DatabaseUrls,
    memory: MemoryService,
    admin_conn: psycopg.Connection[Any],
    clock: Clock,
    tenant: str,
) -> None:
    """INC-7's only entry is redacted while a second delivery of INC-7 (one more
    finding) is half way: the redaction waits for the incident's lock, then sees the
    new entry name the incident, and leaves its node findable by the digest the new
    entry joins it by (re-keyed, the graph would lack the live entry's AFFECTS)."""
    entered, release = threading.Event(), threading.Event()

    class SlowTopology(TopologyService):
        def record_incidents(self, *args: Any, **kwargs: Any) -> dict[str, int]:
            counts = super().record_incidents(*args, **kwargs)
            entered.set()
            release.wait(10)
            return counts

    first, second = connect(database.app), connect(database.app)
    try:
        setup = memory_on(first, clock)
        deliver(setup, incident(tenant, "INC-7", service="search", findings=[("f1", "index")]))
        (only,) = admin_conn.execute(
            "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s", (tenant,)
        ).fetchone() or (None,)
        slow = MemoryService(
            MemoryRepository(second),
            FakeEmbeddingProvider(),
            topology=SlowTopology(TopologyRepository(second), clock=clock),
            clock=clock,
        )
        record = threading.Thread(
            target=deliver,
            args=(slow, incident(tenant, "INC-7", service="search", findings=[("f2", "cache")])),
        )
        record.start()
        assert entered.wait(10)
        redact = threading.Thread(
            target=setup.redact_entry, args=(tenant, only, "legal hold", context())
        )
        redact.start()
        redact.join(0.5)
        assert redact.is_alive()  # it waits for the incident's write
        release.set()
        record.join(10)
        redact.join(10)
    finally:
        release.set()
        first.close()
        second.close()
    assert affected_by(admin_conn, tenant, "INC-7") == {"cache", "index", "search"}
    assert memory.verify_learned_graph(tenant) == (2, [])


def test_verify_finds_a_correlation_lost_or_counted_short(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """--verify checked only that no correlation counts too many incidents: one closed
    by hand, or counted short, with both services' AFFECTS current, verified clean."""
    for number in ("1", "2"):
        deliver(
            memory, incident(tenant, f"INC-{number}", service="checkout", findings=[("f1", "db")])
        )
    deliver(memory, incident(tenant, "INC-3", service="search", findings=[("f1", "index")]))
    assert memory.verify_learned_graph(tenant) == (6, [])
    admin_conn.execute(
        "UPDATE topology_edges SET observed_count = 1 WHERE tenant_id = %s"
        " AND edge_type = 'CORRELATES_WITH' AND target_key LIKE '%%db'",
        (tenant,),
    )
    admin_conn.execute(
        "UPDATE topology_edges SET invalid_at = now() WHERE tenant_id = %s"
        " AND edge_type = 'CORRELATES_WITH' AND target_key LIKE '%%search'",
        (tenant,),
    )
    _, mismatches = memory.verify_learned_graph(tenant) or (0, [])
    assert mismatches == [
        "learned graph: checkout and db correlated 1 times now, affected together by 2 "
        "incidents now",
        "learned graph: index and search correlated 0 times now, affected together by 1 "
        "incidents now",
    ]


def test_overlapping_intervals_written_before_name_a_service_once_in_a_scope(
    memory: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """Two intervals of one correlation valid at one moment (what redrawing an edge
    after its service came back wrote before 0a922fd) listed the service twice in the
    correlated scope (metadata.services_in_scope)."""
    deliver(memory, incident(tenant, "INC-1", service="checkout", findings=[("f1", "db")]))
    admin_conn.execute(
        "UPDATE topology_edges SET invalid_at = now() + interval '1 day' WHERE tenant_id = %s"
        " AND edge_type = 'CORRELATES_WITH'",
        (tenant,),
    )
    admin_conn.execute(
        "INSERT INTO topology_edges (tenant_id, source_key, edge_type, target_key, namespace,"
        " valid_at, first_seen, last_seen) SELECT tenant_id, source_key, edge_type,"
        " target_key, namespace, valid_at, first_seen, last_seen FROM topology_edges"
        " WHERE tenant_id = %s AND edge_type = 'CORRELATES_WITH'",
        (tenant,),
    )
    result = memory.query_org_memory(
        tenant, TOPIC, service="checkout", scope="correlated", as_of=T0 + timedelta(days=1)
    )
    assert result.metadata.services_in_scope == ["checkout", "db"]
