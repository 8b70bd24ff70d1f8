"""The learned graph and staleness on a synthetic microservice organization (issue 27).

A topology of realistic shape (36 services in four layers, shared databases and caches,
three back edges that make cycles, each service with an owner and a repo) and synthetic
incidents over it: a root cause in a service or a datastore, the symptom paged one to
three hops upstream (a service that depends on it), each incident closed with a
corroborated finding about the cause and one about the symptom. Incidents recur along
the same paths (causes and symptom paths are drawn from skewed distributions), as they
do in real organizations.

The first `--train` incidents are recorded through the real incident-closed path (entries
and learned graph in one transaction) and embedded with the real local model; each of the
next `--test` incidents becomes a query an investigator would send at the symptom: a
sentence about what is observed there, `service` = the symptom service. Relevant: the
entries about the same root cause service and mechanism. Reported per scope: hit@5 (a
relevant entry in the top 5), MRR@10, and the services searched.

Then a topology sync retires two services, renames three (two with `replaces`, one a new
node of the same owner and repo) and drops one dependency; what staleness flags is
compared with the synthetic ground truth, and the test queries run again with the served
order and with stale hits moved after the others (what "staleness lowers the rank" would
do).

Run: `.venv/bin/python -m bench.learned_graph [--train 150] [--test 60] [--seed 5]`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres
from grandbo.memory.domain.models import MemoryHit
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage.connections import app_url_for, connect
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

TENANT = "bench-learned"
T0 = datetime(2026, 6, 1, tzinfo=UTC)

EDGE = ["web-bff", "mobile-bff", "public-api", "partner-gateway"]
DOMAIN = [
    "checkout", "orders", "cart", "search-api", "accounts", "recommendations",
    "reviews", "shipping", "returns", "promotions", "reporting", "admin-api",
]  # fmt: skip
CORE = [
    "payments", "ledger", "inventory", "pricing", "users", "auth", "catalog",
    "search-indexer", "notifications", "fraud", "shipping-rates", "media",
]  # fmt: skip
STORES = [
    "postgres-orders", "postgres-payments", "postgres-users", "redis-cache",
    "redis-sessions", "kafka", "elasticsearch", "s3-media",
]  # fmt: skip
LAYERS = [EDGE, DOMAIN, CORE, STORES]
BACK_EDGES = [("inventory", "orders"), ("notifications", "accounts"), ("fraud", "checkout")]

# mechanism: (the cause's finding, what the symptom's finding says it saw, how an
# investigator at the symptom words it before knowing the cause)
STORE_MECHANISMS = {
    "pool": (
        "ran out of connections: a retry path leaked them until max_connections was "
        "reached, and callers waited for a connection until they timed out",
        "requests timed out waiting for a database connection and error rates climbed",
        "requests are timing out while waiting on database connections",
    ),
    "replication": (
        "replica fell minutes behind the primary after a bulk backfill saturated "
        "replication, so reads served stale rows",
        "reads returned stale data and some writes appeared lost to users",
        "users see stale data and recent writes seem to be missing",
    ),
    "disk": (
        "filled its data volume with write-ahead log after archiving stopped, and every "
        "write failed",
        "writes failed with errors and requests returned 500 after retries",
        "writes are failing and requests return 500 errors even after retries",
    ),
    "locks": (
        "held long table locks during a migration, and queries queued behind them for seconds",
        "latency jumped to seconds and requests piled up until they timed out",
        "latency suddenly went to several seconds and requests queue up",
    ),
}
SERVICE_MECHANISMS = {
    "memory": (
        "leaked memory in a response cache until its pods were killed out of memory and "
        "restarted, resetting connections",
        "calls failed intermittently with connection resets while pods restarted",
        "calls fail now and then with connection reset errors",
    ),
    "deploy": (
        "shipped a bad configuration in a deploy that rejected valid requests with 4xx errors",
        "a sudden spike of 4xx and 5xx errors followed the deploy window",
        "a sudden spike of 4xx and 5xx errors started a few minutes ago",
    ),
    "retries": (
        "amplified a brief blip into a retry storm that saturated its thread pools, and "
        "calls to it timed out",
        "latency climbed steadily and calls timed out under normal traffic",
        "latency keeps climbing and calls time out although traffic is normal",
    ),
    "certificate": (
        "served an expired TLS certificate after rotation failed silently, so every "
        "handshake failed",
        "every call failed with TLS handshake errors at once",
        "all calls fail with TLS handshake errors",
    ),
}


@dataclass(frozen=True)
class Lesson:
    """What an entry records: the incident's cause and mechanism, and whose finding it is
    (the cause's own, or the symptom's, which names the cause as its dependency)."""

    cause: str
    mechanism: str
    service: str


@dataclass(frozen=True)
class Incident:
    incident_id: str
    cause: str
    symptom: str
    mechanism: str
    closed_at: datetime


def topology() -> tuple[list[tuple[str, str]], dict[str, dict[str, str]]]:
    """(a DEPENDS_ON b) pairs and each service's owner and repo."""
    rng = random.Random(3)
    pairs: set[tuple[str, str]] = set()
    for level, layer in enumerate(LAYERS[:-1]):
        for service in layer:
            for target in rng.sample(LAYERS[level + 1], rng.randint(2, 3)):
                pairs.add((service, target))
            if level + 2 < len(LAYERS) and rng.random() < 0.5:
                pairs.add((service, rng.choice(LAYERS[level + 2])))
    pairs.update(BACK_EDGES)
    owners = {}
    for level, layer in enumerate(LAYERS):
        for i, service in enumerate(layer):
            owners[service] = {"owner": f"team-{level}-{i // 3}", "repo": f"git/{service}"}
    return sorted(pairs), owners


def dependents(pairs: list[tuple[str, str]]) -> dict[str, set[str]]:
    """Service -> those depending on it within 3 hops (whose symptom it can cause)."""
    direct: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        direct[b].add(a)
    reach: dict[str, set[str]] = {}
    for node in {n for p in pairs for n in p}:
        seen: set[str] = set()
        frontier = {node}
        for _ in range(3):
            frontier = {d for f in frontier for d in direct[f]} - seen - {node}
            seen |= frontier
        reach[node] = seen
    return reach


def incidents(pairs: list[tuple[str, str]], count: int, seed: int) -> list[Incident]:
    rng = random.Random(seed)
    reach = dependents(pairs)
    causes = [c for c in CORE + STORES if any(s in DOMAIN + EDGE for s in reach[c])]
    rng.shuffle(causes)
    weights = [1 / (rank + 1) for rank in range(len(causes))]  # a few causes recur most
    out = []
    for number in range(count):
        cause = rng.choices(causes, weights)[0]
        symptoms = sorted(s for s in reach[cause] if s in DOMAIN + EDGE)
        local = random.Random(f"{seed}:{cause}")  # each cause pages the same few first
        local.shuffle(symptoms)
        symptom = rng.choices(symptoms, [1 / (r + 1) ** 1.5 for r in range(len(symptoms))])[0]
        kinds = sorted(STORE_MECHANISMS if cause in STORES else SERVICE_MECHANISMS)
        local.shuffle(kinds)
        mechanism = rng.choices(kinds, [4, 2, 1, 1][: len(kinds)])[0]
        out.append(
            Incident(
                f"SYN-{number:04d}", cause, symptom, mechanism, T0 + timedelta(hours=6 * number)
            )
        )
    return out


def mechanisms(service: str) -> dict[str, tuple[str, str]]:
    return STORE_MECHANISMS if service in STORES else SERVICE_MECHANISMS


def detail(incident: Incident) -> dict[str, Any]:
    cause_text, symptom_text, _ = mechanisms(incident.cause)[incident.mechanism]
    return {
        "tenant_id": TENANT,
        "incident_id": incident.incident_id,
        "title": f"{incident.symptom} degraded",
        "service": incident.symptom,
        "closed_at": incident.closed_at.isoformat(),
        "findings": [
            {
                "finding_id": "cause",
                "status": "corroborated",
                "title": f"{incident.cause}: {incident.mechanism} failure",
                "summary": f"{incident.cause} {cause_text}.",
                "service": incident.cause,
            },
            {
                "finding_id": "symptom",
                "status": "corroborated",
                "title": f"{incident.symptom} errors from a dependency",
                "summary": f"{incident.symptom}: {symptom_text}; the failure came from its "
                f"dependency {incident.cause}, not from {incident.symptom} itself.",
                "service": incident.symptom,
            },
        ],
    }


def topic(incident: Incident) -> str:
    return f"{incident.symptom} {mechanisms(incident.cause)[incident.mechanism][2]}"


def relevant_ids(incident: Incident, lessons: dict[Any, Lesson], *, own: bool) -> set[Any]:
    """Entries of past incidents with the same cause and mechanism: with `own`, only the
    cause service's own finding (the root cause itself); else any finding naming it."""
    return {
        i
        for i, lesson in lessons.items()
        if (lesson.cause, lesson.mechanism) == (incident.cause, incident.mechanism)
        and (not own or lesson.service == incident.cause)
    }


def score(hits: list[MemoryHit], relevant: set[Any]) -> tuple[float, float]:
    """hit@5 and the reciprocal rank within 10 of the first relevant hit."""
    ids = [h.entry_id for h in hits]
    hit5 = float(any(i in relevant for i in ids[:5]))
    rr = next((1 / rank for rank, i in enumerate(ids[:10], start=1) if i in relevant), 0.0)
    return hit5, rr


def demoted(hits: list[MemoryHit]) -> list[MemoryHit]:
    return [h for h in hits if h.staleness is None] + [h for h in hits if h.staleness is not None]


def run_queries(
    memory: MemoryService,
    tests: list[Incident],
    lessons: dict[Any, Lesson],
    modes: dict[str, str | None],
    *,
    known: set[str],
) -> dict[str, dict[str, float]]:
    """Per mode (None: no service filter; else the scope at the symptom service)."""
    table: dict[str, dict[str, float]] = {}
    for label, scope in modes.items():
        rows: list[tuple[float, ...]] = []
        for incident in tests:
            if scope is not None and incident.symptom not in known:
                continue  # the symptom service itself was retired or renamed
            result = memory.query_org_memory(
                TENANT,
                topic(incident),
                limit=25,
                service=None if scope is None else incident.symptom,
                scope=scope,
            )
            own = relevant_ids(incident, lessons, own=True)
            named = relevant_ids(incident, lessons, own=False)
            rows.append(
                (
                    *score(result.hits, own),
                    *score(result.hits, named),
                    *score(demoted(result.hits), own),
                    len(result.metadata.services_in_scope or known),
                )
            )
        columns = zip(*rows, strict=True)
        (cause5, cause_rr, named5, named_rr, demoted5, demoted_rr, scopes) = columns
        table[label] = {
            "queries": len(rows),
            "cause@5": statistics.mean(cause5),
            "cause MRR@10": statistics.mean(cause_rr),
            "named@5": statistics.mean(named5),
            "named MRR@10": statistics.mean(named_rr),
            "services searched (median)": statistics.median(scopes),
            "cause@5 stale demoted": statistics.mean(demoted5),
            "cause MRR@10 stale demoted": statistics.mean(demoted_rr),
        }
    return table


def timing(memory: MemoryService, tests: list[Incident]) -> None:
    """What the topology costs a query: staleness of every hit, and a scope's walk, against
    the same queries on the same store with no topology tier (the baseline, same run)."""
    bare = MemoryService(memory.repository, memory.provider, clock=memory.now)
    cases: dict[str, tuple[MemoryService, str | None]] = {
        "no topology tier (baseline)": (bare, None),
        "topology tier: staleness of every hit": (memory, None),
        "topology tier: + scope dependencies": (memory, "dependencies"),
        "topology tier: + scope correlated": (memory, "correlated"),
    }
    print("\nquery latency (limit 5; the topic embedded by the local model in every case)")
    print("| case | p50 ms | p95 ms |")
    print("|---|---|---|")
    for label, (service, scope) in cases.items():
        durations = []
        for _ in range(3):
            for t in tests:
                started = time.perf_counter()
                service.query_org_memory(
                    TENANT,
                    topic(t),
                    service=t.symptom if scope else None,
                    scope=scope,
                )
                durations.append((time.perf_counter() - started) * 1000)
        durations.sort()
        p95 = durations[int(0.95 * (len(durations) - 1))]
        print(f"| {label} | {statistics.median(durations):.2f} | {p95:.2f} |")


def print_table(title: str, table: dict[str, dict[str, float]], *, demotion: bool) -> None:
    print(f"\n{title}")
    columns = [
        "queries",
        "cause@5",
        "cause MRR@10",
        "named@5",
        "named MRR@10",
        "services searched (median)",
    ]
    if demotion:
        columns += ["cause@5 stale demoted", "cause MRR@10 stale demoted"]
    print("| scope | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for label, row in table.items():
        cells = [
            f"{row[c]:.0f}" if c in ("queries", "services searched (median)") else f"{row[c]:.3f}"
            for c in columns
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--train", type=int, default=150)
    parser.add_argument("--test", type=int, default=60)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    pairs, owners = topology()
    services = sorted({n for p in pairs for n in p})
    history = incidents(pairs, args.train + args.test, args.seed)
    train, tests = history[: args.train], history[args.train :]
    scratch = Path(tempfile.mkdtemp(prefix="grandbo-bench-learned-"))
    try:
        admin = start_embedded_postgres(scratch)
        migrate(admin)
        conn = connect(app_url_for(admin))
        clock_now = [T0]
        graph = TopologyService(TopologyRepository(conn), clock=lambda: clock_now[0])
        memory = MemoryService(
            MemoryRepository(conn), LocalMiniLMProvider(), topology=graph,
            clock=lambda: clock_now[0],
        )  # fmt: skip

        def batch(
            names: list[str], edges: list[tuple[str, str]], extra: dict[str, Any]
        ) -> dict[str, Any]:
            return {
                "nodes": [
                    {"node_type": "Service", "external_id": n, "properties": owners.get(n, {}),
                     **extra.get(n, {})}
                    for n in names
                ],
                "edges": [
                    {"source": {"node_type": "Service", "external_id": a},
                     "edge_type": "DEPENDS_ON",
                     "target": {"node_type": "Service", "external_id": b}}
                    for a, b in edges
                ],
            }  # fmt: skip

        graph.record(TENANT, batch(services, pairs, {}), sync=True)
        lessons: dict[Any, Lesson] = {}
        for incident in train:
            clock_now[0] = incident.closed_at + timedelta(minutes=5)
            for outcome in record_incident(memory, parse_incident_closed(detail(incident))):
                lessons[outcome.entry.entry_id] = Lesson(
                    incident.cause, incident.mechanism, outcome.entry.service or ""
                )
        memory.embed_pending(TENANT)
        clock_now[0] = tests[0].closed_at
        seen = {(lesson.cause, lesson.mechanism) for lesson in lessons.values()}
        answerable = [t for t in tests if (t.cause, t.mechanism) in seen]
        correlated = {s: graph.services_in_scope(TENANT, s, "correlated") for s in DOMAIN + EDGE}
        upstream = sum(
            1
            for t in answerable
            if t.cause in graph.services_in_scope(TENANT, t.symptom, "dependencies")
        )
        in_learned = sum(1 for t in answerable if t.cause in correlated[t.symptom])
        print(
            f"topology: {len(services)} services, {len(pairs)} DEPENDS_ON edges "
            f"({len(BACK_EDGES)} back edges: cycles); {len(train)} incidents recorded "
            f"({len(lessons)} entries); {len(tests)} held-out incidents, "
            f"{len(answerable)} of them with a lesson about the same cause and mechanism"
        )
        print(
            f"held-out incidents whose cause is within 3 dependency hops of the symptom: "
            f"{upstream}/{len(answerable)}; among the symptom's correlated services: "
            f"{in_learned}/{len(answerable)}"
        )
        modes: dict[str, str | None] = {
            "none (whole lake)": None,
            "service (the symptom's only)": "service",
            "dependencies (3 hops)": "dependencies",
            "correlated (learned)": "correlated",
        }
        before = run_queries(memory, answerable, lessons, modes, known=set(services))
        print_table("before the sync", before, demotion=False)

        # the sync: two services retired, three renamed, one dependency dropped
        retired = ["reviews", "fraud"]
        renamed = {"payments": "payments-service", "search-indexer": "indexer"}  # replaces
        same_identity = {"pricing": "pricing-engine"}  # the same owner and repo
        dropped = ("checkout", "postgres-orders")
        gone = set(retired) | set(renamed) | set(same_identity)
        rename = {**renamed, **same_identity}
        new_names = [rename.get(s, s) for s in services if s not in retired]
        new_pairs = sorted(
            {
                (rename.get(a, a), rename.get(b, b))
                for a, b in pairs
                if a not in retired and b not in retired and (a, b) != dropped
            }
        )
        for old, new in same_identity.items():
            owners[new] = owners[old]
        extra = {new: {"replaces": old} for old, new in renamed.items()}
        clock_now[0] = tests[0].closed_at + timedelta(days=1)
        graph.record(TENANT, batch(new_names, new_pairs, extra), sync=True)
        stale = dict(memory.stale_entries(TENANT))
        entries = {
            e_id: (svc, tags) for e_id, svc, tags in memory.repository.active_subjects(TENANT)
        }
        # what changed under each entry, from the synthetic history alone: its service is
        # gone, or it is a symptom's finding naming a direct dependency the new topology
        # no longer has by that name (dropped, retired or renamed)
        now_pairs = set(new_pairs)
        truth = {
            e_id
            for e_id, lesson in lessons.items()
            if e_id in entries
            and (
                lesson.service in gone
                or (
                    lesson.service != lesson.cause
                    and (lesson.service, lesson.cause) in pairs
                    and (lesson.service, lesson.cause) not in now_pairs
                )
            )
        }
        kinds: dict[str, int] = defaultdict(int)
        for s in stale.values():
            for change in s.changes:
                kinds[change.kind] += 1
        hit = len(truth & set(stale))
        print(
            f"\nafter the sync ({len(retired)} retired, {len(rename)} renamed, 1 dependency "
            f"dropped): {len(stale)} of {len(entries)} active entries flagged stale "
            f"({dict(sorted(kinds.items()))}); ground truth {len(truth)}: "
            f"precision {hit / max(1, len(stale)):.3f}, recall {hit / max(1, len(truth)):.3f}"
        )
        wrong_kind = sum(
            1
            for e_id, s in stale.items()
            if entries[e_id][0] in rename and s.changes[0].kind != "renamed"
        )
        print(f"renamed services' entries flagged as anything but renamed: {wrong_kind}")
        for e_id in sorted(set(stale) - truth, key=str):
            print(f"  flagged beyond the ground truth: {entries[e_id][0]}: {stale[e_id].note}")
        known = set(new_names)
        after = run_queries(memory, answerable, lessons, modes, known=known)
        print_table("after the sync (queries at symptoms that still exist)", after, demotion=True)
        cause_changed = [t for t in answerable if t.cause in gone]
        print_table(
            f"after the sync, the {len(cause_changed)} held-out incidents whose cause was "
            f"retired or renamed ({sum(1 for t in cause_changed if t.cause in rename)} "
            "renamed)",
            run_queries(memory, cause_changed, lessons, modes, known=known),
            demotion=True,
        )
        timing(memory, answerable)
        conn.close()
    finally:
        stop_embedded_postgres(scratch)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
