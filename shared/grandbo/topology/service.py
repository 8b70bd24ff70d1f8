"""The topology service: validated writes, blast radius, criticality, memory scopes."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from grandbo.errors import InvalidInputError, invalid_input_from
from grandbo.storage.tenant_scope import Cursor
from grandbo.tenancy import require_tenant
from grandbo.text.rules import reject_unsafe_text
from grandbo.topology.learned.graph import LEARNED_INCIDENT_PREFIXES, LearnedGraph
from grandbo.topology.learned.staleness import ServiceChange
from grandbo.topology.model import (
    MAX_AFFECTED,
    MAX_CRITICALITY_NODES,
    MAX_EXTERNAL_ID_CHARS,
    MAX_HOPS,
    AffectedNode,
    BlastRadius,
    Criticality,
    Direction,
    EdgeType,
    GraphNode,
    Namespace,
    Namespaces,
    NodeType,
    TopologyBatch,
    breadth_first,
    distance_sums,
    node_key,
    parse_hops,
    parse_namespaces,
    parse_node_type,
    path_to,
    reverse_adjacency,
    utc_or_none,
)
from grandbo.topology.repository import TopologyRepository

MEMORY_SCOPES = ("service", "blast_radius", "dependencies", "correlated")
_BASIS = {
    Namespaces.TOPOLOGY: "reverse_reachability",
    Namespaces.LEARNED: "learned_correlation",
    Namespaces.BOTH: "reverse_reachability+learned",
}


class TopologyService:
    def __init__(
        self,
        repository: TopologyRepository,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.repository = repository
        self.learned = LearnedGraph(repository.learned_graph())
        self._clock = clock
        # (tenant, namespaces) -> (graph version, reverse adjacency) of the current graph
        self._adjacency: dict[
            tuple[str, Namespaces], tuple[tuple[Any, ...], dict[str, list[str]]]
        ] = {}

    # -- writes ------------------------------------------------------------------------

    def record(
        self, tenant_id: str, batch: TopologyBatch | dict[str, Any], *, sync: bool = False
    ) -> dict[str, int]:
        """Upsert a batch (re-discovery reinforces); `sync` also invalidates what it lacks."""
        tenant = require_tenant(tenant_id)
        if not isinstance(batch, TopologyBatch):
            try:
                batch = TopologyBatch.model_validate(batch)
            except ValidationError as exc:
                raise invalid_input_from(exc) from exc
        if batch.namespace is Namespace.LEARNED:
            # derived from the memory's events (and verified against them): a batch could
            # forge a correlation no incident saw, a sync close what they all taught
            raise InvalidInputError(
                "namespace",
                "the learned namespace is written by incidents (incident-closed events and "
                "admin entries naming an incident), not by batches: send topology",
            )
        for index, node in enumerate(batch.nodes):
            if node.node_type is not NodeType.INCIDENT:
                continue
            if node.replaces is not None:
                # it would close an incident's node and carry its edges onto one of its own
                raise InvalidInputError(
                    f"nodes.{index}.replaces",
                    "an Incident node replaces nothing: incidents are the learned graph's",
                )
            if node.external_id.startswith(LEARNED_INCIDENT_PREFIXES):
                # listed first, it would be the topology's, and its syncs would retire it
                raise InvalidInputError(
                    f"nodes.{index}.external_id",
                    "sha256: and redacted: ids are the learned graph's incident nodes",
                )
        return self.repository.upsert(
            tenant, batch.namespace, batch.nodes, batch.edges, self._clock(), sync=sync
        )

    def record_incidents(
        self, cur: Cursor, tenant_id: str, incidents: Mapping[str, Collection[str]], at: datetime
    ) -> dict[str, int]:
        """What incidents taught, on the caller's transaction (`grandbo.topology.learned`):
        an Incident node per incident, AFFECTS to its services, CORRELATES_WITH between
        them; at most `now` (a clock ahead of ours is not the future)."""
        now = self._clock()
        try:
            moment = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
        except OverflowError:  # before year 1 in UTC: no read could load it back
            moment = now
        return self.learned.record_incidents(
            cur, require_tenant(tenant_id), incidents, min(moment, now)
        )

    def rebuild_learned(
        self, tenant_id: str, pairs: Sequence[tuple[str, str, datetime]]
    ) -> dict[str, int]:
        """The learned graph completed from the memory's (incident, service, recorded at)
        pairs (`grandbo rebuild`): what entries written before it existed taught."""
        return self.learned.rebuild(require_tenant(tenant_id), pairs)

    def forget_incidents(
        self,
        cur: Cursor,
        tenant_id: str,
        incident_ids: Sequence[str],
        still_named: Callable[[Cursor, str, list[str]], set[str]],
    ) -> None:
        """The nodes of those incidents no event names any more (`still_named`, asked
        under their locks) re-keyed to ids of their own, on the caller's transaction (a
        redaction): what they taught stays, but no one finds it by hashing a guessed id."""
        self.learned.forget(cur, require_tenant(tenant_id), incident_ids, still_named)

    def verify_learned(self, tenant_id: str, pairs: Collection[tuple[str, str]]) -> list[str]:
        """How the learned graph differs from the memory's (incident, service) pairs."""
        return self.learned.verify(require_tenant(tenant_id), pairs)

    # -- reads -------------------------------------------------------------------------

    def _root(
        self, tenant: str, node_type: object, external_id: object, as_of: datetime | None
    ) -> tuple[str, GraphNode]:
        kind = parse_node_type(node_type)
        if not isinstance(external_id, str) or not external_id.strip():
            raise InvalidInputError("external_id", "must be a non-empty string")
        if len(external_id) > MAX_EXTERNAL_ID_CHARS:
            raise InvalidInputError(
                "external_id", f"must be at most {MAX_EXTERNAL_ID_CHARS} characters"
            )
        try:
            reject_unsafe_text(external_id)
        except ValueError as exc:
            raise InvalidInputError("external_id", str(exc)) from None
        key = node_key(tenant, kind, external_id.strip())
        found = self.repository.nodes(tenant, [key], as_of)
        if key not in found:
            when = f" at {as_of.isoformat()}" if as_of else ""
            raise InvalidInputError("external_id", f"no {kind.value} {external_id!r}{when}")
        return key, found[key]

    def blast_radius(
        self,
        tenant_id: str,
        node_type: object,
        external_id: object,
        *,
        hops: object = MAX_HOPS,
        as_of: datetime | None = None,
        namespaces: object = Namespaces.TOPOLOGY,
    ) -> BlastRadius:
        """Everything affected if the node fails, up to `hops` away, nearest first: its
        dependents (topology), the services that failed with it (learned), or both."""
        return self._reach(
            tenant_id, node_type, external_id, Direction.DEPENDENTS, hops, as_of, namespaces
        )

    def dependencies(
        self,
        tenant_id: str,
        node_type: object,
        external_id: object,
        *,
        hops: object = MAX_HOPS,
        as_of: datetime | None = None,
        namespaces: object = Namespaces.TOPOLOGY,
    ) -> BlastRadius:
        """What the node depends on, up to `hops` away, nearest first (`affected` lists
        them: what could be failing under it); learned edges have no direction."""
        return self._reach(
            tenant_id, node_type, external_id, Direction.DEPENDENCIES, hops, as_of, namespaces
        )

    def node_list(
        self, tenant_id: str, *, as_of: datetime | None = None, limit: int = MAX_AFFECTED
    ) -> list[GraphNode]:
        """The organization's nodes (at `as_of`, or now), by type and id."""
        return self.repository.node_list(require_tenant(tenant_id), utc_or_none(as_of), limit)

    def _reach(
        self,
        tenant_id: str,
        node_type: object,
        external_id: object,
        direction: Direction,
        hops: object,
        as_of: datetime | None,
        namespaces: object,
    ) -> BlastRadius:
        tenant = require_tenant(tenant_id)
        depth = parse_hops(hops)
        when = utc_or_none(as_of)
        which = parse_namespaces(namespaces)
        key, root = self._root(tenant, node_type, external_id, when)
        reached, truncated = self._walk(tenant, key, direction, depth, MAX_AFFECTED, when, which)
        details = self.repository.nodes(tenant, list(reached), when)
        affected = [
            AffectedNode(
                **details[k].model_dump(),
                distance=reached[k].distance,
                path=[_external(p) for p in path_to(key, k, reached)],
            )
            for k in sorted(reached, key=lambda k: (reached[k].distance, k))
            if k in details
        ]
        return BlastRadius(
            node=root,
            hops=depth,
            as_of=when,
            affected=affected,
            truncated=truncated,
            namespaces=which,
        )

    def criticality(
        self,
        tenant_id: str,
        node_type: object,
        external_id: object,
        *,
        as_of: datetime | None = None,
        namespaces: object = Namespaces.TOPOLOGY,
    ) -> Criticality:
        """Sum of 1/distance over all transitive dependents (and, with learned edges, the
        services correlated with it, transitively); the degree when there are none."""
        tenant = require_tenant(tenant_id)
        when = utc_or_none(as_of)
        which = parse_namespaces(namespaces)
        key, root = self._root(tenant, node_type, external_id, when)
        dependents, score = distance_sums(
            key, self._dependents_graph(tenant, when, which), MAX_CRITICALITY_NODES
        )
        degree = self.repository.degree(tenant, key, when)
        basis = _BASIS[which]
        if not dependents:
            score, basis = float(degree), "degree"
        return Criticality(
            node=root,
            as_of=when,
            score=round(score, 6),
            basis=basis,
            dependents=dependents,
            degree=degree,
            namespaces=which,
        )

    def _dependents_graph(
        self, tenant: str, as_of: datetime | None, namespaces: Namespaces
    ) -> dict[str, list[str]]:
        """Unbounded reachability touches most of a connected graph: one read of the
        tenant's edges and an in-memory walk beat a query per BFS level. The current
        graph is cached per container and re-read when its version changes.
        """
        if as_of is not None:
            return self._read_dependents(tenant, as_of, namespaces)
        version = self.repository.graph_version(tenant)
        cached = self._adjacency.get((tenant, namespaces))
        if cached is None or cached[0] != version:
            cached = (version, self._read_dependents(tenant, None, namespaces))
            self._adjacency[(tenant, namespaces)] = cached
        return cached[1]

    def _read_dependents(
        self, tenant: str, as_of: datetime | None, namespaces: Namespaces
    ) -> dict[str, list[str]]:
        edges: list[tuple[str, str]] = []
        if namespaces.topology:
            edges += self.repository.edges_of_type(tenant, EdgeType.DEPENDS_ON, as_of)
        if namespaces.learned:  # a correlation has no direction: each is the other's
            pairs = self.learned.repository.all_correlations(tenant, as_of)
            edges += pairs + [(b, a) for a, b in pairs]
        return reverse_adjacency(edges)

    def services_in_scope(
        self, tenant_id: str, service: str, scope: str, as_of: datetime | None = None
    ) -> list[str]:
        """The service plus, by scope, the services in its blast radius, its dependencies
        (3 hops), or those that failed together with it in past incidents (most often
        first), in the topology valid at `as_of` (now without it); then the older names of
        those services (retired, renamed into one of them)."""
        if scope not in MEMORY_SCOPES:
            raise InvalidInputError("scope", f"must be one of {', '.join(MEMORY_SCOPES)}")
        if scope == "service":
            return [service]
        tenant = require_tenant(tenant_id)
        when = utc_or_none(as_of)
        if scope == "correlated":
            services = [name for name, _ in self.learned.correlated(tenant, service, when)]
        else:
            key = node_key(tenant, NodeType.SERVICE, service)
            direction = Direction.DEPENDENTS if scope == "blast_radius" else Direction.DEPENDENCIES
            reached, _ = self._walk(
                tenant, key, direction, MAX_HOPS, MAX_AFFECTED, when, Namespaces.TOPOLOGY
            )
            services = sorted(
                _external(k) for k in reached if k.split("::")[1] == NodeType.SERVICE.value
            )
        # lessons written under a service's older names are lessons about it (their hits
        # say it was renamed)
        scoped = [service, *services]
        older = [s for s in self.learned.predecessors(tenant, scoped, when) if s not in scoped]
        return [*scoped, *older]

    def service_changes(
        self,
        tenant_id: str,
        subjects: Sequence[tuple[str, Collection[str]]],
        as_of: datetime | None = None,
    ) -> list[list[ServiceChange]]:
        """For each lesson's (service, tags): what the topology says changed about it by
        `as_of` (`grandbo.topology.learned.staleness`)."""
        return self.learned.service_changes(require_tenant(tenant_id), subjects, utc_or_none(as_of))

    def _walk(
        self,
        tenant: str,
        start: str,
        direction: Direction,
        hops: int | None,
        cap: int,
        as_of: datetime | None,
        namespaces: Namespaces,
    ) -> tuple[dict[str, Any], bool]:
        def neighbours(frontier: list[str]) -> Iterable[tuple[str, str]]:
            pairs: list[tuple[str, str]] = []
            if namespaces.topology:
                pairs += self.repository.neighbours(
                    tenant, frontier, direction, EdgeType.DEPENDS_ON, as_of
                )
            if namespaces.learned:
                pairs += [
                    (origin, node)
                    for origin, node, _ in self.learned.repository.correlations(
                        tenant, frontier, as_of
                    )
                ]
            return pairs

        return breadth_first(start, neighbours, max_hops=hops, max_nodes=cap)


def _external(key: str) -> str:
    return key.split("::", 2)[2]
