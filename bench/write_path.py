"""The write path's latency: an incident's delivery (three corroborated findings, one
transaction) into an organization that already holds entries and tombstones, measured
end to end through `record_incident` on a throwaway embedded PostgreSQL (fake model: the
embedding is not what is measured).

Issue 34 added one statement to every creation (`EntryWrites._redacted_again`: is this
a text a redaction removed?), on partial indexes of redactions and removed payloads. Run
this module from two checkouts in the same session to see what it costs:

    .venv/bin/python -m bench.write_path [--entries 2000] [--redacted 50] [--deliveries 300]
    git worktree add /tmp/base <previous commit>
    PYTHONPATH=/tmp/base/shared:/tmp/base .venv/bin/python -m bench.write_path
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.local.bootstrap import open_service
from grandbo.local.postgres import stop_embedded_postgres
from grandbo.local.settings import Settings
from grandbo.memory.domain.models import WriteContext
from grandbo.memory.incidents import parse_incident_closed, record_incident

TENANT = "bench-writes"
WORDS = [
    "pool",
    "exhausted",
    "connection",
    "leak",
    "retry",
    "timeout",
    "replica",
    "lag",
    "disk",
    "volume",
    "certificate",
    "expired",
    "resolver",
    "cache",
    "throttled",
    "queue",
    "visibility",
    "duplicate",
    "migration",
    "lock",
    "flag",
    "rollout",
    "backend",
    "autoscaling",
    "heap",
    "garbage",
    "collection",
    "eviction",
    "session",
    "memory",
]


def _text(n: int) -> tuple[str, str]:
    picked = [WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(6)]
    title = f"Lesson {n}: {' '.join(picked[:3])}"
    summary = (
        f"Incident {n} showed that {' '.join(picked)} went wrong in service-{n % 40}; "
        "the fix was recorded by the on-call after the review."
    )
    return title, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--redacted", type=int, default=50)
    parser.add_argument("--deliveries", type=int, default=300)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="grandbo-bench-writes-"))
    settings = Settings.from_env().model_copy(update={"data_dir": data, "provider": "fake"})
    try:
        with open_service(settings, provider=FakeEmbeddingProvider()) as service:
            ids = []
            for n in range(args.entries):
                title, summary = _text(n)
                context = WriteContext(actor="bench", idempotency_key=f"bench:{n}")
                entry = {"title": title, "summary": summary, "service": f"service-{n % 40}"}
                ids.append(service.record_entry(TENANT, entry, context).entry.entry_id)
            for n in range(args.redacted):
                context = WriteContext(actor="bench", idempotency_key=f"bench:redact:{n}")
                service.redact_entry(TENANT, ids[n * 7], "bench", context)
            timings = []
            for n in range(args.deliveries):
                findings = []
                for k in range(3):
                    title, summary = _text(100_000 + n * 3 + k)
                    findings.append(
                        {
                            "finding_id": f"f{k}",
                            "status": "corroborated",
                            "title": title,
                            "summary": summary,
                        }
                    )
                incident = parse_incident_closed(
                    {
                        "tenant_id": TENANT,
                        "incident_id": f"INC-B{n}",
                        "title": "bench",
                        "service": "service-1",
                        "closed_at": "2026-11-20T10:00:00Z",
                        "findings": findings,
                    }
                )
                started = time.perf_counter()
                record_incident(service, incident)
                timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        p95 = timings[int(0.95 * (len(timings) - 1))]
        print(
            f"record_incident (3 findings) into {args.entries} entries, {args.redacted} "
            f"tombstones, {args.deliveries} deliveries: p50 {statistics.median(timings):.2f} "
            f"ms, p95 {p95:.2f} ms"
        )
    finally:
        stop_embedded_postgres(data)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
