"""The learned graph's service: incidents recorded, correlations read, staleness judged,
and the graph compared with what the memory's events say it should hold.

Incident nodes are keyed by a digest of the incident id (`incident_node_id`): an entry
joins its Incident node by hashing its own `incident_id`. A digest of an id of the
platform's shape (INC-1042) is found by hashing candidates, so a redaction that removes
the last event naming an incident re-keys its node to a random id (`forget`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime

from grandbo.storage.tenant_scope import Cursor
from grandbo.topology.learned.prefetch import PrefetchedReads, StalenessReads, external
from grandbo.topology.learned.repository import LearnedGraphRepository, NodeRow
from grandbo.topology.learned.staleness import (
    ServiceChange,
    gone_dependencies,
    named_by,
    node_change,
    owner_repo,
    retirement,
    valid_at,
)
from grandbo.topology.model import NodeType, node_key

# the external ids of the learned graph's Incident nodes (a digest, or a redacted one's)
LEARNED_INCIDENT_PREFIXES = ("sha256:", "redacted:")


def incident_node_id(incident_id: str) -> str:
    """The external id of an incident's node: a digest, never the id itself."""
    return "sha256:" + hashlib.sha256(incident_id.encode("utf-8")).hexdigest()[:32]


class LearnedGraph:
    def __init__(self, repository: LearnedGraphRepository) -> None:
        self.repository = repository

    def record_incidents(
        self, cur: Cursor, tenant_id: str, incidents: Mapping[str, Collection[str]], at: datetime
    ) -> dict[str, int]:
        """Each incident's node, its AFFECTS and its services' correlations, on `cur` (the
        caller's transaction: the entries and the graph commit or roll back together)."""
        totals: dict[str, int] = {}
        for incident_id in sorted(incidents):
            services = sorted(incidents[incident_id])
            if not services:
                continue
            counts = self.repository.record_incident(
                cur, tenant_id, incident_node_id(incident_id), services, at
            )
            for name, value in counts.items():
                totals[name] = totals.get(name, 0) + value
        return totals

    def forget(
        self,
        cur: Cursor,
        tenant_id: str,
        incident_ids: Sequence[str],
        still_named: Callable[[Cursor, str, list[str]], set[str]],
    ) -> None:
        """The node (and edges) of each incident `still_named` no longer names re-keyed to
        a random id, on `cur`. Asked once their locks are held: an incident's write that
        committed meanwhile names it still; one that waits for us draws a node anew."""
        ids = sorted(set(incident_ids))
        nodes = {i: incident_node_id(i) for i in ids}
        self.repository.lock_incidents(cur, tenant_id, [nodes[i] for i in ids])
        named = still_named(cur, tenant_id, ids)
        for incident_id in ids:
            if incident_id not in named:
                self.repository.rekey_incident(
                    cur, tenant_id, nodes[incident_id], "redacted:" + uuid.uuid4().hex
                )

    def rebuild(self, tenant_id: str, pairs: Sequence[tuple[str, str, datetime]]) -> dict[str, int]:
        """Record the (incident id, service, recorded at) pairs of the memory's events the
        graph lacks, each incident at its first recorded moment, in one transaction: what
        entries written before the learned graph existed (or with no topology tier
        configured) taught. Pairs already there count nothing (AFFECTS is idempotent)."""
        incidents: dict[str, set[str]] = {}
        first: dict[str, datetime] = {}
        for incident_id, service, at in pairs:
            incidents.setdefault(incident_id, set()).add(service)
            first[incident_id] = min(at, first.get(incident_id, at))
        totals: dict[str, int] = {}
        with self.repository.transaction(tenant_id) as cur:
            for incident_id in sorted(incidents):
                counts = self.record_incidents(
                    cur, tenant_id, {incident_id: incidents[incident_id]}, first[incident_id]
                )
                for name, value in counts.items():
                    totals[name] = totals.get(name, 0) + value
        return totals

    def correlated(
        self, tenant_id: str, service: str, as_of: datetime | None
    ) -> list[tuple[str, int]]:
        """Services that failed together with `service` in past incidents, most often first."""
        key = node_key(tenant_id, NodeType.SERVICE, service)
        counts: dict[str, int] = {}
        # each service once: two intervals of a pair valid at one moment (drawn before
        # intervals were kept apart) are one correlation
        for _, node, n in self.repository.correlations(tenant_id, [key], as_of):
            counts[external(node)] = max(n, counts.get(external(node), 0))
        return sorted(counts.items(), key=lambda p: (-p[1], p[0]))

    def service_changes(
        self,
        tenant_id: str,
        subjects: Sequence[tuple[str, Collection[str]]],
        as_of: datetime | None,
    ) -> list[list[ServiceChange]]:
        """For each (service, tags) of a lesson: what changed about its service by `as_of`
        (now without it): retired, renamed, a dependency it names gone."""
        services = sorted({service for service, _ in subjects})
        if not services:
            return [[] for _ in subjects]
        keys = {s: node_key(tenant_id, NodeType.SERVICE, s) for s in services}
        reads = self.staleness_reads(tenant_id, list(keys.values()), as_of)
        known, node_changes = self._known_and_changed(tenant_id, services, as_of, reads)
        # a service the topology never had has no history to be stale against: one read
        # for an organization without a topology
        alive = [keys[s] for s in services if s in known and s not in node_changes]
        gone: dict[str, dict[str, datetime]] = {}
        current: dict[str, set[str]] = {}
        if alive:
            edges = reads.dependency_history(tenant_id, alive, as_of)
            for key in alive:
                own = [e for e in edges if e.source_key == key]
                gone[key] = gone_dependencies(own, as_of)
                current[key] = {
                    e.target_key for e in own if valid_at(e.valid_at, e.invalid_at, as_of)
                }
        # a dependency that went because it was renamed, and is depended on by its new name
        moved = self._known_and_changed(
            tenant_id, sorted({external(t) for g in gone.values() for t in g}), as_of, reads
        )[1]
        changes: list[list[ServiceChange]] = []
        for service, tags in subjects:
            found = [node_changes[service]] if service in node_changes else []
            key = keys[service]
            for target, since in sorted(gone.get(key, {}).items()):
                dependency = external(target)
                if not named_by(tags, dependency):
                    continue
                new = moved.get(dependency)
                if (
                    new is not None
                    and new.replaced_by is not None
                    and (node_key(tenant_id, NodeType.SERVICE, new.replaced_by) in current[key])
                ):
                    found.append(
                        ServiceChange(
                            "dependency_renamed",
                            service,
                            since,
                            replaced_by=new.replaced_by,
                            dependency=dependency,
                        )
                    )
                else:
                    found.append(
                        ServiceChange("dependency_gone", service, since, dependency=dependency)
                    )
            changes.append(found)
        return changes

    def predecessors(
        self, tenant_id: str, services: Sequence[str], as_of: datetime | None
    ) -> list[str]:
        """The services retired by `as_of` whose successor (`replaces`, or the same owner
        and repo) is one of `services`: their lessons are about these under older names."""
        names = set(services)
        keys = [node_key(tenant_id, NodeType.SERVICE, s) for s in services]
        frontier = [
            r
            for r in self.repository.node_history(tenant_id, keys, as_of)
            if valid_at(r.valid_at, r.invalid_at, as_of)
        ]
        found: set[str] = set()
        for _ in range(3):  # a rename of a rename of a rename
            named = {
                r.properties["replaces"]
                for r in frontier
                if isinstance(r.properties.get("replaces"), str)
            }
            identities = [pair for r in frontier if (pair := owner_repo(r))]
            alike = (
                {
                    r.external_id
                    for r in self.repository.identity_history(tenant_id, identities, as_of)
                }
                if identities
                else set()
            )
            candidates = sorted((named | alike) - names - found)
            renamed = {
                old
                for old, change in self._node_changes(tenant_id, candidates, as_of).items()
                if change.replaced_by in names | found
            }
            if not renamed:
                break
            found |= renamed
            frontier = self.repository.node_history(
                tenant_id, [node_key(tenant_id, NodeType.SERVICE, s) for s in renamed], as_of
            )
        return sorted(found)

    def _node_changes(
        self, tenant_id: str, services: Sequence[str], as_of: datetime | None
    ) -> dict[str, ServiceChange]:
        """The services among these the topology retired (or renamed) by `as_of`."""
        return self._known_and_changed(tenant_id, services, as_of)[1]

    def staleness_reads(
        self, tenant_id: str, keys: Sequence[str], as_of: datetime | None
    ) -> StalenessReads:
        """What judging these nodes' staleness reads: one self-scoped statement's rows, or
        the repository's statements on a schema before migration 0027."""
        rows = self.repository.staleness_rows(tenant_id, keys, as_of)
        if rows is None:
            return self.repository
        return PrefetchedReads.of(tenant_id, keys, as_of, rows)

    def _known_and_changed(
        self,
        tenant_id: str,
        services: Sequence[str],
        as_of: datetime | None,
        reads: StalenessReads | None = None,
    ) -> tuple[set[str], dict[str, ServiceChange]]:
        """The services among these the topology has had a node for by `as_of`, and those
        of them it retired (or renamed) by then."""
        if not services:
            return set(), {}
        reads = self.repository if reads is None else reads
        keys = {s: node_key(tenant_id, NodeType.SERVICE, s) for s in services}
        history: dict[str, list[NodeRow]] = {key: [] for key in keys.values()}
        for row in reads.node_history(tenant_id, list(keys.values()), as_of):
            history[row.node_key].append(row)
        known = {s for s in services if history[keys[s]]}
        retired = {s: last for s in known if (last := retirement(history[keys[s]], as_of))}
        if not retired:
            return known, {}
        candidates = reads.successors(
            tenant_id,
            [last.external_id for last in retired.values()],
            [pair for last in retired.values() if (pair := owner_repo(last))],
            as_of,
        )
        return known, {s: node_change(s, last, candidates) for s, last in retired.items()}

    def verify(self, tenant_id: str, expected: Collection[tuple[str, str]]) -> list[str]:
        """The learned graph against the (incident id, service) pairs of the memory's
        entry events: every pair has its AFFECTS edge (unless its service was retired
        when the incident came: the graph records no edge to a retired service), and no
        correlation counts more incidents in one interval than affected both of its
        services (what a redelivery counted twice would show), nor fewer now than the
        incidents whose current AFFECTS reach both (a correlation lost or never
        counted). Incidents the events no longer name (a redaction removes an entry's
        incident id) are not drift."""
        affects, correlations = self.repository.learned_incidents(tenant_id)
        mismatches = []
        wanted = {
            (
                node_key(tenant_id, NodeType.INCIDENT, incident_node_id(i)),
                node_key(tenant_id, NodeType.SERVICE, s),
            )
            for i, s in expected
        }
        missing = sorted(wanted - affects)
        retired = self.repository.retired_nodes(tenant_id, [s for _, s in missing])
        mismatches += [
            f"learned graph: incident {external(i)} has no AFFECTS edge to {external(s)}"
            for i, s in missing
            if s not in retired
        ]
        together = _together(affects)
        mismatches += [
            f"learned graph: {external(a)} and {external(b)} correlated {count} times, "
            f"affected together by {together.get((a, b), 0)} incidents"
            for (a, b), count in sorted(correlations.items())
            if count > together.get((a, b), 0)
        ]
        # and no fewer now than the incidents whose current edges reach both (a
        # correlation lost or never counted)
        current, counts = self.repository.current_learned(tenant_id)
        mismatches += [
            f"learned graph: {external(a)} and {external(b)} correlated "
            f"{counts.get((a, b), 0)} times now, affected together by {n} incidents now"
            for (a, b), n in sorted(_together(current).items())
            if counts.get((a, b), 0) < n
        ]
        return mismatches


def _together(affects: Collection[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(a, b), a < b -> how many incidents of these AFFECTS pairs reach both."""
    by_incident: dict[str, set[str]] = {}
    for incident, service in affects:
        by_incident.setdefault(incident, set()).add(service)
    together: dict[tuple[str, str], int] = {}
    for services in by_incident.values():
        ordered = sorted(services)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                together[(a, b)] = together.get((a, b), 0) + 1
    return together
