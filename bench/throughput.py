"""Local throughput: a query is one topic embedding plus the database.

In one process, on a throwaway embedded PostgreSQL with the local MiniLM model, an
organization of --entries synthetic incident entries (bench/synthetic.py) is written and
embedded. Then, for 1, 2 and 8 concurrent clients (threads, each with its own
connection), each for --seconds:

- service: `MemoryService.query_org_memory(topic)`, the whole query path;
- embedding only: `provider.embed_one(topic)`, the model's ceiling;
- database only: `MemoryRepository.search(...)` with topic vectors embedded beforehand,
  the store's ceiling.

A query needs both, one after the other, so its ceiling is the two combined in sequence
(1 / (1/embedding + 1/database)), and on 2 cores they also share the CPU: the table
prints the service beside each ceiling, all measured in the same run.

Run: `.venv/bin/python -m bench.throughput [--entries 2000] [--seconds 10]`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench.synthetic import pool, topic_text
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.local.bootstrap import resolve_urls
from grandbo.local.postgres import stop_embedded_postgres
from grandbo.local.settings import Settings
from grandbo.memory.domain.idempotency import KeySpace, idempotency_key
from grandbo.memory.domain.models import NewEntry, WriteContext
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage.connections import connect
from grandbo.text.tags import tokenize

TENANT = "bench-throughput"
CLIENTS = (1, 2, 8)


def run(clients: int, seconds: float, make: Callable[[], Callable[[int], object]]) -> float:
    """Calls per second of `clients` threads, each calling its own `make()` in a loop."""
    calls = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def worker(index: int) -> None:
        call = make()
        start.wait()
        n = 0
        while not stop.is_set():
            call(n)
            n += 1
        calls[index] = n

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(calls) / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="grandbo-bench-throughput-"))
    try:
        urls = resolve_urls(Settings(data_dir=data_dir))
        migrate(urls.admin)
        provider = LocalMiniLMProvider()
        setup = MemoryService(MemoryRepository(connect(urls.app)), provider)
        texts = pool(args.entries)
        setup.record_entries(
            TENANT,
            [
                (
                    NewEntry(title=title, summary=summary, service=service),
                    WriteContext(
                        actor="bench", idempotency_key=idempotency_key(KeySpace.CLI, str(i))
                    ),
                )
                for i, (service, title, summary) in enumerate(texts)
            ],
        )
        setup.embed_pending(TENANT)
        rng = random.Random(7)
        topics = [topic_text(rng) for _ in range(64)]
        vectors = provider.embed(topics)
        provider.embed_one(topics[0])  # the single-text session, loaded before timing

        def service_client() -> Callable[[int], object]:
            service = MemoryService(MemoryRepository(connect(urls.app)), provider)
            return lambda n: service.query_org_memory(TENANT, topics[n % len(topics)])

        def embedding_client() -> Callable[[int], object]:
            return lambda n: provider.embed_one(topics[n % len(topics)])

        def database_client() -> Callable[[int], object]:
            repository = MemoryRepository(connect(urls.app))
            return lambda n: repository.search(
                TENANT,
                topic_tags=tokenize(topics[n % len(topics)]),
                topic_vector=vectors[n % len(vectors)],
                embed_rev=provider.embed_rev,
                vector_cutoff=provider.vector_cutoff,
                services=None,
                leg_limit=LEG_LIMIT,
                now=datetime.now(UTC),
            )

        print(
            f"{args.entries} entries, local MiniLM, {args.seconds:.0f} s per cell, "
            f"{len(topics)} topics; queries/s"
        )
        print(
            f"{'clients':>7} {'service':>9} {'embedding only':>15} {'database only':>14}"
            f" {'both in sequence':>17} {'service / that':>15}"
        )
        for clients in CLIENTS:
            figures = [
                run(clients, args.seconds, make)
                for make in (service_client, embedding_client, database_client)
            ]
            # a query embeds, then searches: the two ceilings combined in sequence
            both = 1 / (1 / figures[1] + 1 / figures[2])
            print(
                f"{clients:>7} {figures[0]:>9.1f} {figures[1]:>15.1f} {figures[2]:>14.1f}"
                f" {both:>17.1f} {figures[0] / both:>15.0%}"
            )
    finally:
        stop_embedded_postgres(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
