"""A search in one call (issue 28, items 1-2): `grandbo_search` (migration 0022) beside the
six statements it replaced (`search_statements`), on the same database in the same run,
directly and through PgBouncer in transaction mode (what RDS Proxy does between
transactions); and the same answers, field by field, for every search measured.

Organizations of 300, 5,000 and 50,000 entries (bench.synthetic, MiniLM vectors, loaded
as bench.query_scale loads them) beside filler organizations, the two larger with their
per-organization HNSW index. Repository level (the topic's embedding excluded), the
benchmarks' 40 topics in turn, p50 / p95 / p99 ms.

    .venv/bin/python -m bench.search_round_trip [--runs 200] [--json /tmp/round_trip.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

from tests.integration.search_comparison import same_answers
from tests.integration.transaction_pooler import start_transaction_pooler

from bench import synthetic
from bench.query_scale import (
    Lake,
    embedded_pool,
    percentiles,
    scratch_server,
    synthetic_topics,
)
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
from grandbo.storage.connections import DatabaseUrls, app_url_for, connect

SIZES = {"small (300)": 300, "medium (5,000)": 5_000, "large (50,000)": 50_000}
FILLERS = 40  # organizations of 250 entries around the measured ones


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    topics = synthetic_topics(provider)
    report: dict[str, Any] = {"runs": args.runs, "sizes": SIZES, "fillers": FILLERS}
    with scratch_server() as admin_url:
        lake = Lake(admin_url, provider.embed_rev)
        started = time.perf_counter()
        for n, (name, size) in enumerate(SIZES.items()):
            lake.load(name.split()[0], synthetic.organization(size, texts, pool_vectors, n))
        for n in range(FILLERS):
            lake.load(f"filler-{n:02d}", synthetic.organization(250, texts, pool_vectors, 100 + n))
        lake.analyze()
        report["indexes"] = len(ensure_hnsw_indexes(admin_url))
        lake.analyze()
        report["load_s"] = round(time.perf_counter() - started, 1)
        print(f"loaded and indexed in {report['load_s']} s", flush=True)
        report |= measure_both_paths(
            admin_url, {name: name.split()[0] for name in SIZES}, provider, topics, args.runs
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


def measure_both_paths(
    admin_url: str,
    measured: dict[str, str],
    provider: LocalMiniLMProvider,
    topics: list[tuple[Any, list[str]]],
    runs: int,
) -> dict[str, Any]:
    """`measure` for each organization (name: tenant), directly and through a transaction
    pooler (PgBouncer, as RDS Proxy between transactions); keyed "<path>, <name>"."""
    urls = DatabaseUrls(admin=admin_url, app=app_url_for(admin_url))
    pooler = start_transaction_pooler(urls, pool_size=1)
    out: dict[str, Any] = {}
    try:
        paths = {
            "direct": MemoryRepository(connect(urls.app)),
            "PgBouncer (transaction mode)": MemoryRepository(connect(pooler.url_for(urls.app))),
        }
        for path, repository in paths.items():
            for name, tenant in measured.items():
                out[f"{path}, {name}"] = measure(repository, tenant, provider, topics, runs)
                print(path, name, json.dumps(out[f"{path}, {name}"]), flush=True)
    finally:
        pooler.stop()
    return out


def measure(
    repository: MemoryRepository,
    tenant: str,
    provider: LocalMiniLMProvider,
    topics: list[tuple[Any, list[str]]],
    runs: int,
) -> dict[str, Any]:
    """The statements and the function in alternation over the topics; each search's two
    answers compared."""
    samples: dict[str, list[float]] = {"six statements": [], "one call": []}
    differing = 0
    it = itertools.cycle(topics)
    for n in range(runs + 2):
        vector, tags = next(it)
        settings: dict[str, Any] = {
            "topic_tags": tags,
            "topic_vector": vector,
            "embed_rev": provider.embed_rev,
            "vector_cutoff": provider.vector_cutoff,
            "services": None,
            "leg_limit": LEG_LIMIT,
        }
        legs = {}
        for label, search in (
            ("six statements", repository.search_statements),
            ("one call", repository.search),
        ):
            t0 = time.perf_counter()
            legs[label] = search(tenant, **settings)
            if n >= 2:  # two warm-up rounds
                samples[label].append((time.perf_counter() - t0) * 1000)
        differing += not same_answers(legs["six statements"], legs["one call"])
    return {label: percentiles(values) for label, values in samples.items()} | {
        "searches compared": runs + 2,
        "differing answers": differing,
    }


if __name__ == "__main__":
    main()
