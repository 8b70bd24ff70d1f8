"""The topology service: validated writes, blast radius, criticality, memory scopes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from grandbo.errors import InvalidInputError, invalid_input_from
from grandbo.tenancy import require_tenant
from grandbo.text.rules import reject_unsafe_text
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
    NodeType,
    TopologyBatch,
    breadth_first,
    distance_sums,
    node_key,
    parse_hops,
    parse_node_type,
    path_to,
    reverse_adjacency,
    utc_or_none,
)
from grandbo.topology.repository import TopologyRepository

MEMORY_SCOPES = ("service", "blast_radius", "dependencies")


class TopologyService:
    def __init__(
        self,
        repository: TopologyRepository,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.repository = repository
        self._clock = clock
        # tenant -> (graph version, reverse DEPENDS_ON adjacency) of the current graph
        self._adjacency: dict[str, tuple[tuple[Any, ...], dict[str, list[str]]]] = {}

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
        return self.repository.upsert(
            tenant, batch.namespace, batch.nodes, batch.edges, self._clock(), sync=sync
        )

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
    ) -> BlastRadius:
        """Everything affected if the node fails, up to `hops` away, nearest first."""
        tenant = require_tenant(tenant_id)
        depth = parse_hops(hops)
        when = utc_or_none(as_of)
        key, root = self._root(tenant, node_type, external_id, when)
        reached, truncated = self._walk(
            tenant, key, Direction.DEPENDENTS, depth, MAX_AFFECTED, when
        )
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
            node=root, hops=depth, as_of=when, affected=affected, truncated=truncated
        )

    def criticality(
        self,
        tenant_id: str,
        node_type: object,
        external_id: object,
        *,
        as_of: datetime | None = None,
    ) -> Criticality:
        """Sum of 1/distance over all transitive dependents; the degree when there are none."""
        tenant = require_tenant(tenant_id)
        when = utc_or_none(as_of)
        key, root = self._root(tenant, node_type, external_id, when)
        dependents, score = distance_sums(
            key, self._dependents_graph(tenant, when), MAX_CRITICALITY_NODES
        )
        degree = self.repository.degree(tenant, key, when)
        basis = "reverse_reachability"
        if not dependents:
            score, basis = float(degree), "degree"
        return Criticality(
            node=root,
            as_of=when,
            score=round(score, 6),
            basis=basis,
            dependents=dependents,
            degree=degree,
        )

    def _dependents_graph(self, tenant: str, as_of: datetime | None) -> dict[str, list[str]]:
        """Unbounded reachability touches most of a connected graph: one read of the
        tenant's DEPENDS_ON edges and an in-memory walk beat a query per BFS level. The
        current graph is cached per container and re-read when its version changes.
        """
        if as_of is not None:
            edges = self.repository.edges_of_type(tenant, EdgeType.DEPENDS_ON, as_of)
            return reverse_adjacency(edges)
        version = self.repository.graph_version(tenant)
        cached = self._adjacency.get(tenant)
        if cached is None or cached[0] != version:
            edges = self.repository.edges_of_type(tenant, EdgeType.DEPENDS_ON, None)
            cached = (version, reverse_adjacency(edges))
            self._adjacency[tenant] = cached
        return cached[1]

    def services_in_scope(self, tenant_id: str, service: str, scope: str) -> list[str]:
        """The service plus, by scope, the services in its blast radius or its dependencies."""
        if scope not in MEMORY_SCOPES:
            raise InvalidInputError("scope", f"must be one of {', '.join(MEMORY_SCOPES)}")
        if scope == "service":
            return [service]
        tenant = require_tenant(tenant_id)
        key = node_key(tenant, NodeType.SERVICE, service)
        direction = Direction.DEPENDENTS if scope == "blast_radius" else Direction.DEPENDENCIES
        reached, _ = self._walk(tenant, key, direction, MAX_HOPS, MAX_AFFECTED, None)
        services = [_external(k) for k in reached if k.split("::")[1] == NodeType.SERVICE.value]
        return [service, *sorted(services)]

    def _walk(
        self,
        tenant: str,
        start: str,
        direction: Direction,
        hops: int | None,
        cap: int,
        as_of: datetime | None,
    ) -> tuple[dict[str, Any], bool]:
        def neighbours(frontier: list[str]) -> list[tuple[str, str]]:
            return self.repository.neighbours(
                tenant, frontier, direction, EdgeType.DEPENDS_ON, as_of
            )

        return breadth_first(start, neighbours, max_hops=hops, max_nodes=cap)


def _external(key: str) -> str:
    return key.split("::", 2)[2]
