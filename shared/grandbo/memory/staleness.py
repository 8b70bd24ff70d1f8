"""A lesson about a changed system says so: the topology's changes to a hit's service, in
a field and in words.

The topology tier judges what changed (`ServiceScopes.service_changes`, passed in: memory
never imports it); this module turns its answer into each hit's `staleness` and the
sentence a reader or a model sees. Staleness never changes the rank (docs/EVAL.md says
why).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from grandbo.memory.models import MemoryHit, Staleness, TopologyChange


class ServiceChangeView(Protocol):
    """What the topology tier answers for one change (read by attribute)."""

    @property
    def kind(self) -> str: ...
    @property
    def service(self) -> str: ...
    @property
    def since(self) -> datetime: ...
    @property
    def replaced_by(self) -> str | None: ...
    @property
    def dependency(self) -> str | None: ...


class ServiceChanges(Protocol):
    def service_changes(
        self,
        tenant_id: str,
        subjects: Sequence[tuple[str, Collection[str]]],
        as_of: datetime | None = None,
    ) -> Sequence[Sequence[ServiceChangeView]]:
        """For each (service, tags) of a lesson, what changed about its service."""
        ...


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d")


def describe(change: TopologyChange) -> str:
    if change.kind == "renamed":
        return f"{change.service} was renamed to {change.replaced_by} on {_when(change.since)}"
    if change.kind == "retired":
        return f"{change.service} was retired on {_when(change.since)}"
    if change.kind == "dependency_renamed":
        return (
            f"{change.dependency}, a dependency of {change.service}, is now "
            f"{change.replaced_by} (since {_when(change.since)})"
        )
    return (
        f"{change.service} no longer depends on {change.dependency} (since {_when(change.since)})"
    )


def staleness_of(changes: Sequence[ServiceChangeView]) -> Staleness | None:
    if not changes:
        return None
    models = [TopologyChange.model_validate(c, from_attributes=True) for c in changes]
    note = (
        "Stale: "
        + "; ".join(describe(c) for c in models)
        + ". This lesson describes the system as it was; check it against the current one."
    )
    return Staleness(changes=models, note=note)


def with_staleness(
    topology: ServiceChanges | None,
    tenant_id: str,
    hits: list[MemoryHit],
    as_of: datetime | None,
) -> list[MemoryHit]:
    """The hits, each about a service the topology changed carrying its `staleness`."""
    subjects = [(hit.service, hit.tags) for hit in hits if hit.service]
    if topology is None or not subjects:
        return hits
    answers = iter(topology.service_changes(tenant_id, subjects, as_of))
    marked = []
    for hit in hits:
        stale = staleness_of(next(answers)) if hit.service else None
        marked.append(hit if stale is None else hit.model_copy(update={"staleness": stale}))
    return marked


def stale_subjects(
    topology: ServiceChanges | None,
    tenant_id: str,
    subjects: Sequence[tuple[UUID, str, Collection[str]]],
) -> list[tuple[UUID, Staleness]]:
    """Of (entry id, service, tags), the entries whose service the topology changed."""
    if topology is None or not subjects:
        return []
    answers = topology.service_changes(tenant_id, [(s, tags) for _, s, tags in subjects])
    return [
        (entry_id, stale)
        for (entry_id, _, _), changes in zip(subjects, answers, strict=True)
        if (stale := staleness_of(changes)) is not None
    ]
