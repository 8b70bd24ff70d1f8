"""The console's retrieval-log pages at 10 M rows in one organization (issue 44, point 2).

On a throwaway embedded PostgreSQL, one organization's log is filled with --rows questions
(SQL generate_series as the owner: a year of a flooding agent, 1 in 8 answered with
nothing, 1 in 4 under one of 50,000 incidents) and a baseline organization's with 10,000,
in the same run. Each page's read, as the admin API makes it, is timed --runs times in
each: the incidents page (`retrieval_incidents`), the unanswered page
(`retrievals(unanswered=True)`, its first and a later page), one incident's page, and
what the incidents page read before issue 44 (every row aggregated) once, for contrast;
and what a redaction's scrub of the log costs in each (rolled back).

Run: `.venv/bin/python -m bench.retrieval_log_pages [--rows 10000000] [--runs 20]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres
from grandbo.memory.domain.log_quotes import quotes_of
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.retrievals import scrub_quotes
from grandbo.migrations import migrate
from grandbo.storage.connections import app_url_for, connect

BASELINE_ROWS = 10_000
_FILL = """
INSERT INTO org_memory_retrievals
    (tenant_id, at, caller, incident_id, topic, hits, latency_ms, no_precedent)
SELECT %(tenant)s,
       now() - make_interval(secs => (%(rows)s - g) * 3),
       'query:bench-' || (g %% 7),
       CASE WHEN g %% 4 = 0 THEN 'INC-' || (g %% 50000) END,
       'checkout requests time out waiting for a database connection, question ' || g,
       CASE WHEN g %% 8 = 0 THEN '[]'::jsonb
            ELSE jsonb_build_array(jsonb_build_object(
                'entry_id', md5(g::text)::uuid, 'rank', 1, 'confidence', 0.4)) END,
       12.5,
       g %% 8 = 0
FROM generate_series(1, %(rows)s) g
"""
_BEFORE = (
    "SELECT incident_id, count(*) AS asked,"
    " count(*) FILTER (WHERE coalesce((SELECT max(coalesce((h->>'confidence')::float8, 0))"
    " FROM jsonb_array_elements(hits) h), 0) < 0.5) AS unanswered,"
    " min(at) AS first_at, max(at) AS last_at FROM org_memory_retrievals"
    " WHERE tenant_id = %s AND incident_id IS NOT NULL"
    " GROUP BY incident_id ORDER BY max(at) DESC, incident_id LIMIT 100"
)


class _RolledBack(Exception):  # noqa: N818 - what happens, not a failure
    """Ends a measured transaction without keeping what it wrote."""


def _timed(call: Callable[[], object], runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grandbo-log-pages-") as scratch:
        admin_url = start_embedded_postgres(Path(scratch))
        try:
            migrate(admin_url)
            admin = connect(admin_url)
            admin.autocommit = True
            sizes = {"baseline": BASELINE_ROWS, "large": args.rows}
            for name, rows in sizes.items():
                started = time.perf_counter()
                admin.execute(_FILL, {"tenant": f"bench-{name}", "rows": rows})
                print(f"filled {name}: {rows:,} rows in {time.perf_counter() - started:.0f} s")
            admin.execute("VACUUM ANALYZE org_memory_retrievals")
            repo = MemoryRepository(connect(app_url_for(admin_url)))
            print(f"{'read':<34} {'10,000 rows p50/p95 ms':>24} {f'{args.rows:,} rows':>22}")
            reads: dict[str, Callable[[str], object]] = {
                "incidents page": lambda t: repo.retrieval_incidents(t, 100),
                "unanswered page, first": lambda t: repo.retrievals(t, unanswered=True, limit=100),
                "one incident's page": lambda t: repo.retrievals(t, incident_id="INC-4", limit=200),
                "the whole log's page 1": lambda t: repo.retrievals(t, limit=50),
            }
            for label, read in reads.items():
                figures = []
                for name in sizes:
                    p50, p95 = _timed(lambda read=read, name=name: read(f"bench-{name}"), args.runs)
                    figures.append(f"{p50:.1f} / {p95:.1f}")
                print(f"{label:<34} {figures[0]:>24} {figures[1]:>22}")
            # what a redaction adds: its scrub of the log (every question that holds a
            # telling token of the text, and those tied to the entry), in its transaction
            quotes = quotes_of(["the password hunter2-Zq81xW was pasted in the channel"])
            for name in sizes:
                started = time.perf_counter()
                try:
                    with repo._tenant_scope(f"bench-{name}") as cur:
                        scrub_quotes(cur, f"bench-{name}", [uuid4()], ["INC-4"], [], quotes)
                        raise _RolledBack  # measured, not kept
                except _RolledBack:
                    pass
                print(
                    f"a redaction's scrub of the log ({name}, {sizes[name]:,} rows): "
                    f"{(time.perf_counter() - started) * 1000:,.0f} ms"
                )
            started = time.perf_counter()
            admin.execute(_BEFORE, ("bench-large",)).fetchall()
            print(
                f"before issue 44, the incidents page aggregated every row: "
                f"{(time.perf_counter() - started) * 1000:,.0f} ms at {args.rows:,} rows (once)"
            )
        finally:
            stop_embedded_postgres(Path(scratch))


if __name__ == "__main__":
    main()
