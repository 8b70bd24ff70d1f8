"""Blast radius (3 hops) and criticality on a synthetic graph: 10,000 nodes, 50,000 edges.

The graph is layered like real service topologies (edges point from higher layers to
lower ones, plus 2 % back edges that make cycles), written through the real
`TopologyService` into a throwaway embedded PostgreSQL. Baseline in the same run: the
same breadth-first walk over an in-memory adjacency dict (the floor without a database).

Run: `.venv/bin/python -m bench.topology [--nodes N] [--edges M] [--samples S]`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres
from grandbo.migrations import migrate
from grandbo.storage.connections import app_url_for, connect
from grandbo.topology.model import (
    breadth_first,
    distance_sums,
    reverse_adjacency,
    service_dependencies,
)
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

TENANT = "bench-graph"
LAYERS = 8


def synthetic_graph(
    nodes: int, edges: int, seed: int = 7
) -> tuple[list[str], list[tuple[str, str]]]:
    rng = random.Random(seed)
    names = [f"svc-{i:05d}" for i in range(nodes)]
    layer = {name: i * LAYERS // nodes for i, name in enumerate(names)}
    by_layer: dict[int, list[str]] = defaultdict(list)
    for name, level in layer.items():
        by_layer[level].append(name)
    pairs: set[tuple[str, str]] = set()
    while len(pairs) < edges:
        a = rng.choice(names)
        if rng.random() < 0.02 or layer[a] == LAYERS - 1:
            b = rng.choice(names)  # a back edge: cycles exist, as in real graphs
        else:
            b = rng.choice(by_layer[rng.randint(layer[a] + 1, LAYERS - 1)])
        if a != b:
            pairs.add((a, b))  # a DEPENDS_ON b
    return names, sorted(pairs)


def timed(fn: Callable[[], object], samples: int) -> tuple[float, float, float]:
    durations = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        durations.append((time.perf_counter() - started) * 1000)
    durations.sort()
    p95 = durations[min(len(durations) - 1, int(0.95 * len(durations)))]
    return statistics.median(durations), p95, max(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    names, pairs = synthetic_graph(args.nodes, args.edges)
    scratch = Path(tempfile.mkdtemp(prefix="grandbo-bench-graph-"))
    try:
        admin = start_embedded_postgres(scratch)
        migrate(admin)
        conn = connect(app_url_for(admin))
        topology = TopologyService(TopologyRepository(conn))
        started = time.perf_counter()
        topology.record(TENANT, service_dependencies(pairs), sync=True)
        load_s = time.perf_counter() - started
        with connect(admin) as owner:
            owner.execute("ANALYZE topology_nodes")
            owner.execute("ANALYZE topology_edges")

        adjacency = reverse_adjacency(
            (f"{TENANT}::Service::{a}", f"{TENANT}::Service::{b}") for a, b in pairs
        )
        dependents: dict[str, list[str]] = defaultdict(list)
        for a, b in pairs:
            dependents[b].append(a)

        def memory_walk(start: str, hops: int | None) -> int:
            def neighbours(frontier: list[str]) -> list[tuple[str, str]]:
                return [(n, d) for n in frontier for d in dependents[n]]

            return len(breadth_first(start, neighbours, max_hops=hops, max_nodes=50_000)[0])

        rng = random.Random(11)
        sample = [rng.choice(names) for _ in range(args.samples)]
        it = iter(sample * 6)
        results = {
            "blast radius, 3 hops (SQL per BFS level)": timed(
                lambda: topology.blast_radius(TENANT, "Service", next(it), hops=3), len(sample)
            ),
            "  baseline: in-memory BFS, 3 hops": timed(
                lambda: memory_walk(next(it), 3), len(sample)
            ),
            "criticality, full reverse reachability": timed(
                lambda: topology.criticality(TENANT, "Service", next(it)), len(sample)
            ),
            "criticality, cold (cache dropped every call)": timed(
                lambda: (
                    topology._adjacency.clear(),
                    topology.criticality(TENANT, "Service", next(it)),
                ),
                len(sample),
            ),
            "  baseline: in-memory walk, adjacency built": timed(
                lambda: distance_sums(f"{TENANT}::Service::{next(it)}", adjacency, 50_000),
                len(sample),
            ),
        }
        sizes = [
            len(topology.blast_radius(TENANT, "Service", n, hops=3).affected) for n in sample[:50]
        ]
        print(f"graph: {len(names)} nodes, {len(pairs)} DEPENDS_ON edges; loaded in {load_s:.1f} s")
        print(
            f"blast radius size (3 hops, 50 samples): median {statistics.median(sizes)}, "
            f"max {max(sizes)}"
        )
        title = f"operation ({args.samples} random nodes)"
        print(f"{title:<46} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for label, (p50, p95, worst) in results.items():
            print(f"{label:<46} {p50:>8.2f} {p95:>8.2f} {worst:>8.2f}")
        conn.close()
    finally:
        stop_embedded_postgres(scratch)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
