"""What the topology's time axis says changed about a lesson's service: the rules.

A lesson was written about a service. At a moment R (now, or a query's `as_of`):

- `retired`: the service had a node before R and none is valid at R;
- `renamed`: retired, and a node valid at R replaces it: it says so (`replaces`, as a
  sync batch may), or it is the one service valid at R with the same owner and repo (its
  `owner` and `repo` properties) that the topology first recorded in the batch that
  retired the old one (a sibling of a monorepo that lived beside it, or one that came
  later, succeeds nobody);
- `dependency_gone`: a service the lesson names (a tag of the entry is the name's
  identifier) was a dependency of the lesson's service (DEPENDS_ON) before R and is no
  longer at R; `dependency_renamed` when that dependency was renamed and the lesson's
  service depends on it under its new name.

Pure functions over node and edge intervals; the graph reads them
(`grandbo.topology.learned.graph`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from grandbo.text.tags import tokenize
from grandbo.topology.learned.repository import EdgeRow, NodeRow

ChangeKind = Literal["retired", "renamed", "dependency_gone", "dependency_renamed"]


@dataclass(frozen=True, slots=True)
class ServiceChange:
    kind: ChangeKind
    service: str  # the lesson's service
    since: datetime  # when the topology changed
    replaced_by: str | None = None  # renamed: the service (or dependency) replacing it
    dependency: str | None = None  # dependency_*: the dependency the lesson names


def valid_at(start: datetime, end: datetime | None, moment: datetime | None) -> bool:
    """Whether an interval holds at `moment` (now, for None: it is still open)."""
    if moment is None:
        return end is None
    return start <= moment and (end is None or end > moment)


def retirement(history: Sequence[NodeRow], moment: datetime | None) -> NodeRow | None:
    """The node's last interval, if the node existed and none of its intervals holds."""
    if not history or any(valid_at(r.valid_at, r.invalid_at, moment) for r in history):
        return None
    return max(history, key=lambda r: r.valid_at)


def owner_repo(row: NodeRow) -> tuple[str, str] | None:
    owner, repo = row.properties.get("owner"), row.properties.get("repo")
    if isinstance(owner, str) and isinstance(repo, str) and owner and repo:
        return owner, repo
    return None


def successor(last: NodeRow, candidates: Sequence[NodeRow]) -> NodeRow | None:
    """What replaces a retired node: one that says so, else the only one of its owner
    and repo first recorded in the batch that retired it (a monorepo's siblings, which
    lived beside it or came later, are not successors)."""
    explicit = [c for c in candidates if c.properties.get("replaces") == last.external_id]
    if explicit:
        return min(explicit, key=lambda c: c.valid_at)
    identity = owner_repo(last)
    alike = [
        c
        for c in candidates
        if c.node_key != last.node_key
        and identity is not None
        and owner_repo(c) == identity
        and last.invalid_at is not None
        and c.first_seen == last.invalid_at
    ]
    return alike[0] if len(alike) == 1 else None


def node_change(service: str, last: NodeRow, candidates: Sequence[NodeRow]) -> ServiceChange:
    since = last.invalid_at or last.valid_at
    after = successor(last, candidates)
    if after is None:
        return ServiceChange("retired", service, since)
    return ServiceChange("renamed", service, since, replaced_by=after.external_id)


def gone_dependencies(edges: Sequence[EdgeRow], moment: datetime | None) -> dict[str, datetime]:
    """Targets of edges that held before `moment` and hold no longer: when they went."""
    intervals: dict[str, list[EdgeRow]] = {}
    for edge in edges:
        intervals.setdefault(edge.target_key, []).append(edge)
    gone: dict[str, datetime] = {}
    for target, rows in intervals.items():
        if any(valid_at(r.valid_at, r.invalid_at, moment) for r in rows):
            continue
        closed = [r.invalid_at for r in rows if r.invalid_at is not None]
        if closed:
            gone[target] = max(closed)
    return gone


def named_by(tags: Collection[str], name: str) -> bool:
    """Whether a lesson's tags name a service: the name's identifier is one of them
    (`payments-db` is tagged whole; a one-word name by its stem)."""
    tokens = tokenize(name)
    return bool(tokens) and tokens[0] in tags
