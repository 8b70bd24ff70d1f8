"""A query's staleness reads in one statement: `grandbo_staleness_rows` (migration 0027)
returns a superset of what `LearnedGraph.service_changes` asks the repository for, and
`PrefetchedReads` answers each of those questions from the rows, filtered as the
statement would and in its order, so the judgement is the same code either way
(tests/integration/test_staleness_reads.py holds the two paths' answers equal)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from grandbo.topology.learned.repository import EdgeRow, NodeRow
from grandbo.topology.model import NodeType, node_key


def external(key: str) -> str:
    """A node key's external id: everything after its second '::'."""
    return key.split("::", 2)[2]


class StalenessReads(Protocol):
    """What judging staleness reads (`LearnedGraphRepository`'s statements)."""

    def node_history(
        self, tenant_id: str, keys: Sequence[str], until: datetime | None
    ) -> list[NodeRow]: ...

    def successors(
        self,
        tenant_id: str,
        replaced: Sequence[str],
        owner_repo: Sequence[tuple[str, str]],
        as_of: datetime | None,
    ) -> list[NodeRow]: ...

    def dependency_history(
        self, tenant_id: str, sources: Sequence[str], until: datetime | None
    ) -> list[EdgeRow]: ...


class NotPrefetchedError(LookupError):
    """A question the prefetched rows were not read for (a bug: they cover the path)."""


def _text(value: Any) -> str | None:
    """A JSON property as PostgreSQL's `->>` gives it."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True, slots=True)
class PrefetchedReads:
    """The rows `grandbo_staleness_rows` returned for `keys` at `until`."""

    keys: frozenset[str]
    until: datetime | None
    nodes: tuple[NodeRow, ...]
    edges: tuple[EdgeRow, ...]
    candidates: tuple[NodeRow, ...]

    @classmethod
    def of(
        cls,
        tenant_id: str,
        keys: Sequence[str],
        until: datetime | None,
        rows: Sequence[dict[str, Any]],
    ) -> PrefetchedReads:
        parts: dict[str, list[dict[str, Any]]] = {"node": [], "edge": [], "successor": []}
        for row in rows:
            parts[row["part"]].append(row)

        def node(row: dict[str, Any]) -> NodeRow:
            return NodeRow(
                node_key=row["node_key"],
                external_id=row["external_id"],
                valid_at=row["valid_at"],
                invalid_at=row["invalid_at"],
                properties=row["properties"],
                first_seen=row["first_seen"],
            )

        def ordered(part: str) -> list[dict[str, Any]]:
            return sorted(parts[part], key=lambda row: row["ord"])

        edges = tuple(
            EdgeRow(r["source_key"], r["target_key"], r["valid_at"], r["invalid_at"])
            for r in ordered("edge")
        )
        targets = {e.target_key for e in edges}
        return cls(
            # a gone dependency is judged as the Service of its external id, whatever
            # its own type (the function reads that key's history too)
            keys=frozenset(keys)
            | targets
            | {node_key(tenant_id, NodeType.SERVICE, external(t)) for t in targets},
            until=until,
            nodes=tuple(node(r) for r in ordered("node")),
            edges=edges,
            candidates=tuple(node(r) for r in ordered("successor")),
        )

    def _check(self, keys: Sequence[str], until: datetime | None) -> None:
        if until != self.until or not set(keys) <= self.keys:
            raise NotPrefetchedError(f"not read for {sorted(set(keys) - self.keys)} at {until}")

    def node_history(
        self, tenant_id: str, keys: Sequence[str], until: datetime | None
    ) -> list[NodeRow]:
        self._check(keys, until)
        wanted = set(keys)
        return [row for row in self.nodes if row.node_key in wanted]

    def successors(
        self,
        tenant_id: str,
        replaced: Sequence[str],
        owner_repo: Sequence[tuple[str, str]],
        as_of: datetime | None,
    ) -> list[NodeRow]:
        if as_of != self.until:
            raise NotPrefetchedError(f"successors not read at {as_of}")
        names, pairs = set(replaced), set(owner_repo)
        return [
            row
            for row in self.candidates
            if _text(row.properties.get("replaces")) in names
            or (_text(row.properties.get("owner")), _text(row.properties.get("repo"))) in pairs
        ]

    def dependency_history(
        self, tenant_id: str, sources: Sequence[str], until: datetime | None
    ) -> list[EdgeRow]:
        self._check(sources, until)
        wanted = set(sources)
        return [edge for edge in self.edges if edge.source_key in wanted]
