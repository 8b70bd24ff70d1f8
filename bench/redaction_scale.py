"""A redaction at the log's size a year brings (issue 52, point 1): the organization's
retrieval log loaded with N questions, a secret planted in a few of them in other
spellings, then the entry holding it redacted **as the application role** under forced
row-level security, with the deployed path's statement bound (9 s), the schema's
log-spellings table and its search function owned by a role that is no superuser and
cannot bypass row-level security (as Aurora's master user is). Beside it, in the same run
and on the same rows, the search the scrub made before migration 0040 (a trigram `ILIKE`
of the topics as the application role, which the policy keeps from the index):

    .venv/bin/python -m bench.redaction_scale --rows 1000000 10000000

Prints, per size: the load, the redaction's seconds, what its receipt found, the plan of
its search as the owner runs it (the index named), and the baseline search's seconds.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.domain.models import WriteContext
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import app_url_for, connect

# as Aurora's master user: owns the schema, no superuser, no BYPASSRLS
SCHEMA_OWNER = "grandbo_schema_owner"
# the application role's bound on a statement in AWS (infra: the role's statement_timeout)
DEPLOYED_STATEMENT_TIMEOUT = "9s"
_WORDS = [
    "checkout",
    "payments",
    "gateway",
    "timeout",
    "database",
    "pool",
    "connection",
    "retry",
    "deploy",
    "cache",
    "redis",
    "kafka",
    "consumer",
    "lag",
    "disk",
    "full",
    "oom",
    "killed",
    "pod",
    "restart",
    "dns",
    "resolution",
    "tls",
    "certificate",
    "expired",
    "queue",
    "backlog",
    "latency",
    "spike",
    "error",
    "rate",
    "502",
    "503",
    "upstream",
]


def owned_as_in_aurora(admin_url: str) -> None:
    """The log's spellings table and its search function owned by SCHEMA_OWNER (a role
    with neither superuser nor BYPASSRLS), as the deployed schema's owner is."""
    with connect(admin_url) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (SCHEMA_OWNER,))
        if exists.fetchone() is None:
            conn.execute(f"CREATE ROLE {SCHEMA_OWNER} NOLOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"GRANT SELECT, REFERENCES ON org_memory_retrievals TO {SCHEMA_OWNER}")
        conn.execute(f"ALTER TABLE org_memory_retrieval_spellings OWNER TO {SCHEMA_OWNER}")
        conn.execute(
            f"ALTER FUNCTION grandbo_log_reach(text, text[], uuid[]) OWNER TO {SCHEMA_OWNER}"
        )


def load_log(admin_url: str, tenant_id: str, rows: int) -> float:
    """`rows` questions of the organization (words of incidents, an id each, 50 callers,
    5,000 incidents) and their spellings as the database spells them; seconds."""
    started = time.monotonic()
    with connect(admin_url) as conn:
        conn.execute("DROP INDEX IF EXISTS org_memory_retrieval_spellings_trgm")
        conn.execute(
            "INSERT INTO org_memory_retrievals (tenant_id, retrieval_id, at, caller,"
            " incident_id, topic, hits, latency_ms, no_precedent)"
            " SELECT %(tenant)s, gen_random_uuid(), now() - make_interval(secs => i),"
            " 'caller-' || (i %% 50), 'INC-' || (i %% 5000),"
            " 'why does ' || (%(words)s::text[])[1 + i %% %(n)s] || ' '"
            " || (%(words)s::text[])[1 + (i / 7) %% %(n)s] || ' fail after '"
            " || (%(words)s::text[])[1 + (i / 13) %% %(n)s] || ' on host-'"
            " || left(md5(i::text), 10), '[]', 1, true"
            " FROM generate_series(1, %(rows)s) AS i",
            {"tenant": tenant_id, "words": _WORDS, "n": len(_WORDS), "rows": rows},
        )
        conn.execute(
            "INSERT INTO org_memory_retrieval_spellings (tenant_id, retrieval_id, spelled, served)"
            " SELECT tenant_id, retrieval_id,"
            "   grandbo_spelling(topic) || ' ' || grandbo_spelling(incident_id), '{}'"
            " FROM org_memory_retrievals WHERE tenant_id = %s",
            (tenant_id,),
        )
        conn.execute(
            "CREATE INDEX org_memory_retrieval_spellings_trgm"
            " ON org_memory_retrieval_spellings USING gin (spelled gin_trgm_ops)"
        )
        conn.execute("ANALYZE org_memory_retrievals")
        conn.execute("ANALYZE org_memory_retrieval_spellings")
    return time.monotonic() - started


def plant(admin_url: str, tenant_id: str, secret: str) -> int:
    """The secret in three questions, each spelled otherwise; how many."""
    spelt = [
        f"who pasted {secret[:6]}-{secret[6:]} into chat",
        "who pasted " + "".join(chr(ord(c) + 0xFEE0) for c in secret),
        f"is {secret.lower()} still valid",
    ]
    with connect(admin_url) as conn:
        for topic in spelt:
            conn.execute(
                "WITH q AS (INSERT INTO org_memory_retrievals (tenant_id, caller, topic, hits,"
                " latency_ms, no_precedent) VALUES (%s, 'planted', %s, '[]', 1, true)"
                " RETURNING tenant_id, retrieval_id, topic)"
                " INSERT INTO org_memory_retrieval_spellings (tenant_id, retrieval_id, spelled,"
                " served) SELECT tenant_id, retrieval_id, grandbo_spelling(topic), '{}' FROM q",
                (tenant_id, topic),
            )
    return len(spelt)


def redact_as_the_application(admin_url: str, tenant_id: str, secret: str) -> dict[str, Any]:
    """The entry holding the secret written and redacted as the application role, every
    statement bound as in AWS; the seconds and the receipt."""
    app = connect(app_url_for(admin_url))
    try:
        app.execute(f"SET statement_timeout = '{DEPLOYED_STATEMENT_TIMEOUT}'")
        service = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
        context = WriteContext(actor="bench", idempotency_key=f"bench-{uuid.uuid4()}")
        lesson: dict[str, object] = {
            "title": "Signing key pasted into the incident channel",
            "summary": f"During the outage the payments signing key {secret} was pasted into "
            "the incident channel by the on-call engineer and rotated within the hour.",
        }
        entry_id = service.record_entry(tenant_id, lesson, context).entry.entry_id
        started = time.monotonic()
        outcome = service.redact_entry(
            tenant_id,
            entry_id,
            "a key was pasted",
            WriteContext(actor="bench", idempotency_key=f"bench-{uuid.uuid4()}"),
        )
        seconds = time.monotonic() - started
    finally:
        app.close()
    assert outcome.receipt is not None
    return {"seconds": seconds, "receipt": outcome.receipt}


def owner_plan(admin_url: str, tenant_id: str, pattern: str) -> str:
    """The plan of the scrub's search as the function's owner runs it."""
    with connect(admin_url) as conn:
        conn.execute(f"SET ROLE {SCHEMA_OWNER}")
        rows = conn.execute(
            "EXPLAIN SELECT retrieval_id FROM org_memory_retrieval_spellings"
            " WHERE spelled LIKE %s AND tenant_id = %s",
            (f"%{pattern}%", tenant_id),
        ).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def baseline_search(admin_url: str, tenant_id: str, secret: str) -> float:
    """Seconds of the scrub's search before 0040: a trigram ILIKE of the topics, as the
    application role under the policy (0035's index, made for it here)."""
    with connect(admin_url) as conn:
        conn.execute(
            "CREATE INDEX IF NOT EXISTS bench_topic_trgm ON org_memory_retrievals"
            " USING gin (topic gin_trgm_ops)"
        )
    app = connect(app_url_for(admin_url))
    try:
        app.autocommit = False
        with app.transaction():
            app.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant_id,))
            started = time.monotonic()
            app.execute(
                "SELECT count(*) FROM org_memory_retrievals WHERE tenant_id = %s"
                " AND topic ILIKE %s",
                (tenant_id, f"%{secret}%"),
            ).fetchone()
            return time.monotonic() - started
    finally:
        app.close()


def run(rows: int) -> dict[str, Any]:
    from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres
    from grandbo.migrations import migrate

    data = Path(tempfile.mkdtemp(prefix="grandbo-redaction-scale-"))
    admin = start_embedded_postgres(data)
    try:
        migrate(admin)
        owned_as_in_aurora(admin)
        tenant = "bench-redaction"
        secret = "Zq7vK2mP9xL4tR8w"  # noqa: S105 - a made-up secret to redact
        loaded = load_log(admin, tenant, rows)
        planted = plant(admin, tenant, secret)
        redaction = redact_as_the_application(admin, tenant, secret)
        plan = owner_plan(admin, tenant, "zq7vk2mp9xl4tr8w")
        baseline = baseline_search(admin, tenant, secret)
        return {
            "rows": rows,
            "loaded_s": loaded,
            "planted": planted,
            "plan": plan,
            "baseline_s": baseline,
            **redaction,
        }
    finally:
        stop_embedded_postgres(data)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    args = parser.parse_args()
    for rows in args.rows:
        result = run(rows)
        receipt = result["receipt"]
        questions = next(p for p in receipt.places if p.place == "retrieval log: questions")
        print(
            f"{rows:>11,} questions (loaded in {result['loaded_s']:.0f} s):"
            f" redaction {result['seconds']:.2f} s as grandbo_app (bound"
            f" {DEPLOYED_STATEMENT_TIMEOUT} a statement); found {questions.found} of"
            f" {result['planted']} planted, removed {questions.removed}, left {questions.left};"
            f" baseline ILIKE search as grandbo_app {result['baseline_s']:.2f} s"
        )
        print("  the search's plan as the owner:\n    " + result["plan"].replace("\n", "\n    "))


if __name__ == "__main__":
    main()
