"""After a redaction, the table files rewritten so the removed text's bytes are gone.

A redaction removes the text from every read at once (`grandbo.memory.repository.redaction`),
but PostgreSQL keeps the old row versions' bytes in the table and index files until the
space is reused: checked on this machine with `grep -a` on the relation files after a
plain `VACUUM` of the events and entries and a checkpoint, the marker was still in six
files: the organization's entries partition and its tags index, the tag postings and the
tag statistics tables, and both their primary keys (tests/integration/test_redaction_rewrite.py).
Only `VACUUM FULL` of those tables cleared them: it writes each table and its indexes
anew, holding an ACCESS EXCLUSIVE lock on it meanwhile (every read and write of that
table waits; `grandbo rewrite-redacted` says which and measures how long). The event log
is pruned by a plain VACUUM (a page's dead tuples are compacted away), which takes no
lock a write waits for. A checkpoint then writes the pages out.

What still holds the text after this: the write-ahead log until its segments are
recycled, and backups until they expire (docs/OPERATIONS.md, "Redacting an entry").
DDL-grade statements: run as the schema owner (the admin URL), never from a request path.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import errors, sql

from grandbo.storage.connections import connect

# migration 0016: entries are hash-partitioned by organization into this many partitions
ENTRY_PARTITIONS = 16
# rewritten whole (VACUUM FULL): their dead versions kept the removed words; the retrieval
# log's questions and their spellings too, scrubbed and removed ones (issue 52)
SHARED_TABLES = (
    "org_memory_tag_postings",
    "org_memory_tag_stats",
    "org_memory_retrievals",
    "org_memory_retrieval_spellings",
)
# pruned in place (VACUUM): the rewritten payloads' old versions
PRUNED_TABLES = ("org_memory_events",)


@dataclass(frozen=True)
class Rewrite:
    table: str
    how: str  # "VACUUM FULL" (rewritten, locked) or "VACUUM" (pruned, not locked)
    bytes_before: int
    bytes_after: int
    seconds: float


@dataclass(frozen=True)
class RewritePlan:
    """What the rewrite will lock, before it runs: (table, how, bytes) in order."""

    steps: list[tuple[str, str, int]]

    def describe(self) -> str:
        lines = []
        for table, how, size in self.steps:
            lock = (
                "ACCESS EXCLUSIVE lock: every read and write of it waits until it is done"
                if how == "VACUUM FULL"
                else "no lock a read or write waits for"
            )
            lines.append(f"  {how} {table} ({size / 1e6:.1f} MB): {lock}")
        return "\n".join(lines)


_Cursor = psycopg.Cursor[tuple[object, ...]]


def _one(cur: _Cursor, query: str, params: tuple[object, ...]) -> object:
    cur.execute(query, params)
    row = cur.fetchone()
    return None if row is None else row[0]


def _size(cur: _Cursor, table: str) -> int:
    return int(str(_one(cur, "SELECT pg_total_relation_size(%s::regclass)", (table,)) or 0))


def _entries_partition(cur: _Cursor, tenant_id: str) -> str:
    for remainder in range(ENTRY_PARTITIONS):
        holds = _one(
            cur,
            "SELECT satisfies_hash_partition('org_memory_entries'::regclass, %s, %s, %s::text)",
            (ENTRY_PARTITIONS, remainder, tenant_id),
        )
        if holds is True:
            return f"org_memory_entries_p{remainder:02d}"
    raise AssertionError("every organization is in one of the entries partitions")


def plan_rewrite(admin_url: str, tenant_id: str | None = None) -> RewritePlan:
    """The tables a rewrite after a redaction goes over: the organization's entries
    partition (all of them without `tenant_id`), the postings and tag statistics, the
    retrieval log and its spellings, the event log (pruned)."""
    with connect(admin_url) as conn, conn.cursor() as cur:
        if tenant_id is None:
            entries = [f"org_memory_entries_p{n:02d}" for n in range(ENTRY_PARTITIONS)]
        else:
            entries = [_entries_partition(cur, tenant_id)]
        steps = [
            (table, how, _size(cur, table))
            for table, how in [
                *((t, "VACUUM FULL") for t in (*entries, *SHARED_TABLES)),
                *((t, "VACUUM") for t in PRUNED_TABLES),
            ]
        ]
        return RewritePlan(steps)


def rewrite_redacted(
    admin_url: str, plan: RewritePlan, progress: Callable[[Rewrite], None] = lambda _: None
) -> list[Rewrite]:
    """Run the plan, table by table (each lock held only for its own table), then a
    checkpoint (skipped, and said, where the role may not: Aurora runs its own)."""
    done = []
    with connect(admin_url) as conn, conn.cursor() as cur:
        for table, how, _ in plan.steps:
            before = _size(cur, table)
            started = time.monotonic()
            verb = sql.SQL("VACUUM FULL" if how == "VACUUM FULL" else "VACUUM")
            cur.execute(sql.SQL("{} {}").format(verb, sql.Identifier(table)))
            step = Rewrite(table, how, before, _size(cur, table), time.monotonic() - started)
            progress(step)
            done.append(step)
        # Aurora's storage writes pages out itself; elsewhere CHECKPOINT needs pg_checkpoint
        with contextlib.suppress(errors.InsufficientPrivilege):
            cur.execute("CHECKPOINT")
    return done
