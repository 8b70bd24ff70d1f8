"""The same-answers comparison of issue 28: the one-call search against the six statements,
field by field. One definition for the test (tests/integration/test_search_function.py)
and the benchmark (bench/search_round_trip.py)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from grandbo.memory.domain.models import MemoryEntry
from grandbo.memory.repository import SearchLegs


def comparable(
    statements: SearchLegs, one_call: SearchLegs
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both answers as plain data, every field; `entries` for the candidates (the
    statements' dict also held the few extra lexical rows read past expired entries, which
    nothing reads)."""
    left, right = asdict(statements), asdict(one_call)
    ids = {c.entry_id for c in statements.lexical} | {c.entry_id for c in statements.vector}
    left["entries"] = {i: _answered(e) for i, e in statements.entries.items() if i in ids}
    right["entries"] = {i: _answered(e) for i, e in one_call.entries.items()}
    return left, right


def _answered(entry: MemoryEntry) -> MemoryEntry:
    """The entry as an answer holds it: `tags_unfilled` is the store row's state for the
    write path (a correction fills an entry stored before migration 0041), never
    serialized; a search function from before 0041 (a backend's cached plan across the
    migration) does not return `given_tags`, so it cannot tell, and shows the stems spelled
    back either way."""
    return entry.model_copy(update={"tags_unfilled": False})


def same_answers(statements: SearchLegs, one_call: SearchLegs) -> bool:
    left, right = comparable(statements, one_call)
    return left == right


# the words the same-answers tests build their lakes and topics from
WORDS = [
    "checkout",
    "payments",
    "ledger",
    "postgres",
    "pool",
    "connection",
    "leak",
    "timeout",
    "retry",
    "deploy",
    "canary",
    "rollback",
    "dns",
    "resolver",
    "cache",
    "ttl",
    "heap",
    "garbage",
    "collector",
    "latency",
    "p99",
    "certificate",
    "tls",
    "handshake",
    "queue",
    "backlog",
    "consumer",
    "lag",
    "partition",
    "disk",
    "volume",
    "wal",
    "replication",
]
