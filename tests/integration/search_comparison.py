"""The same-answers comparison of issue 28: the one-call search against the six statements,
field by field. One definition for the test (tests/integration/test_search_function.py)
and the benchmark (bench/search_round_trip.py)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from grandbo.memory.repository import SearchLegs


def comparable(
    statements: SearchLegs, one_call: SearchLegs
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both answers as plain data, every field; `entries` for the candidates (the
    statements' dict also held the few extra lexical rows read past expired entries, which
    nothing reads)."""
    left, right = asdict(statements), asdict(one_call)
    ids = {c.entry_id for c in statements.lexical} | {c.entry_id for c in statements.vector}
    left["entries"] = {i: e for i, e in statements.entries.items() if i in ids}
    return left, right


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
