"""The staleness check in one statement (issue 33): `grandbo_staleness_rows` and
`PrefetchedReads` give `service_changes` the same answers as the statements they replace,
on the staleness tests' topology and on random ones (renames by `replaces` and by owner and
repo, retirements, dependencies dropped and renamed, read at several moments)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from grandbo.topology.learned.graph import LearnedGraph
from grandbo.topology.learned.prefetch import NotPrefetchedError, PrefetchedReads
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

from .test_staleness import AFTER, BEFORE, T1, T2, T3, Clock, depends, service_node


def both_paths(
    graph: LearnedGraph, tenant: str, subjects: list[tuple[str, list[str]]], as_of: datetime | None
) -> tuple[Any, Any]:
    prefetched = graph.service_changes(tenant, subjects, as_of)
    statements = LearnedGraph(graph.repository)
    statements.staleness_reads = lambda _t, _k, _a: graph.repository  # type: ignore[method-assign,assignment,return-value]
    return prefetched, statements.service_changes(tenant, subjects, as_of)


@pytest.fixture
def topology(app_conn: psycopg.Connection[Any]) -> tuple[TopologyService, Clock]:
    clock = Clock()
    return TopologyService(TopologyRepository(app_conn), clock=clock), clock


SUBJECTS = [
    ("checkout", ["payments-db", "cache", "pool"]),
    ("orders", ["pool"]),
    ("legacy-auth", []),
    ("billing", ["billing"]),
    ("stock", []),
    ("search", ["kafka"]),  # never in the topology
]


def test_the_staleness_tests_topology_reads_the_same_at_every_moment(
    topology: tuple[TopologyService, Clock], tenant: str
) -> None:
    service, clock = topology
    service.record(tenant, BEFORE, sync=True)
    clock.now = T3
    service.record(tenant, AFTER, sync=True)
    for as_of in (None, T1, T2, T3, T3 + timedelta(seconds=1), T1 - timedelta(days=1)):
        prefetched, statements = both_paths(service.learned, tenant, SUBJECTS, as_of)
        assert prefetched == statements, as_of
    now, _ = both_paths(service.learned, tenant, SUBJECTS, None)
    assert {c.kind for changes in now for c in changes} >= {"renamed", "retired"}


@pytest.mark.parametrize("seed", range(12))
def test_random_topologies_read_the_same(
    topology: tuple[TopologyService, Clock], tenant: str, seed: int
) -> None:
    rng = random.Random(seed)
    service, clock = topology
    names = [f"svc-{i}" for i in range(10)]
    alive = set(rng.sample(names, 7))
    start = datetime(2026, 9, 1, tzinfo=UTC)
    moments = []
    for step in range(4):
        clock.now = start + timedelta(days=10 * step)
        moments.append(clock.now)
        nodes = []
        for name in sorted(alive):
            extra: dict[str, Any] = {}
            if rng.random() < 0.3:
                extra = {"owner": f"team-{rng.randint(0, 2)}", "repo": f"git/{rng.randint(0, 2)}"}
            nodes.append(service_node(name, **extra))
        if step and rng.random() < 0.7:  # a rename, said by the batch
            old = rng.choice(sorted(alive))
            new = f"{old}-v{step}"
            alive.discard(old)
            alive.add(new)
            nodes = [n for n in nodes if n["external_id"] != old]
            nodes.append(service_node(new, replaces=old))
        if step and rng.random() < 0.5 and len(alive) > 2:  # a retirement
            gone = rng.choice(sorted(alive))
            alive.discard(gone)
            nodes = [n for n in nodes if n["external_id"] != gone]
        listed = sorted(n["external_id"] for n in nodes)
        edges = [depends(a, b) for a in listed for b in listed if a != b and rng.random() < 0.15]
        service.record(tenant, {"nodes": nodes, "edges": edges}, sync=True)
    every = sorted({*names, *alive, *(f"{n}-v{s}" for n in names for s in range(1, 4))})
    subjects = [(name, rng.sample(every, 3)) for name in every]
    changed = 0
    for as_of in (None, *moments, moments[-1] + timedelta(hours=1)):
        prefetched, statements = both_paths(service.learned, tenant, subjects, as_of)
        assert prefetched == statements, (seed, as_of)
        changed += sum(len(changes) for changes in prefetched)
    assert changed, "the topology changed: something is stale at some moment"


def test_another_tenants_topology_is_not_read(
    topology: tuple[TopologyService, Clock], tenant: str, other_tenant: str
) -> None:
    service, _ = topology
    service.record(other_tenant, BEFORE, sync=True)
    keys = [f"{other_tenant}::Service::checkout"]
    assert service.learned.repository.staleness_rows(tenant, keys, None) == []


def test_a_question_the_rows_were_not_read_for_is_refused() -> None:
    reads = PrefetchedReads.of("t", ["t::Service::a"], None, [])
    assert reads.node_history("t", ["t::Service::a"], None) == []
    with pytest.raises(NotPrefetchedError):
        reads.node_history("t", ["t::Service::b"], None)
    with pytest.raises(NotPrefetchedError):
        reads.successors("t", ["a"], [], T1)


def test_a_dependency_of_another_type_that_went_reads_the_same(
    topology: tuple[TopologyService, Clock], tenant: str
) -> None:
    """The break-it pass's case: a Service depending on an AwsResource (and a Repo) that a
    later sync drops, judged as the Service of its external id: no error, same answer."""
    service, clock = topology

    def on(kind: str, name: str) -> dict[str, Any]:
        return {
            "source": {"node_type": "Service", "external_id": "checkout"},
            "edge_type": "DEPENDS_ON",
            "target": {"node_type": kind, "external_id": name},
        }

    service.record(
        tenant,
        {
            "nodes": [
                service_node("checkout"),
                {"node_type": "AwsResource", "external_id": "orders-db"},
                {"node_type": "Repo", "external_id": "git::mono"},
                service_node("orders-db"),
            ],
            "edges": [on("AwsResource", "orders-db"), on("Repo", "git::mono")],
        },
        sync=True,
    )
    clock.now = T3
    service.record(tenant, {"nodes": [service_node("checkout")], "edges": []}, sync=True)
    subjects = [("checkout", ["orders-db", "git::mono"]), ("checkout", [])]
    for as_of in (None, T1, T3):
        prefetched, statements = both_paths(service.learned, tenant, subjects, as_of)
        assert prefetched == statements, as_of
    now, _ = both_paths(service.learned, tenant, subjects, None)
    assert any(change.kind == "dependency_gone" for change in now[0])
