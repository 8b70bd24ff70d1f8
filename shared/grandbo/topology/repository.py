"""The topology repository: the only SQL of the knowledge-graph tier.

Types reach SQL only as values of whitelisted enums, always as bound parameters; nothing
is interpolated. Every statement names its tenant and runs in an RLS-scoped transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from grandbo.errors import InvalidInputError
from grandbo.storage.tenant_scope import TenantScopedRepository
from grandbo.topology.learned.repository import LearnedGraphRepository, topology_lock
from grandbo.topology.model import (
    Direction,
    EdgeType,
    GraphNode,
    Namespace,
    NodeType,
    TopologyEdge,
    TopologyNode,
    node_key,
)

# An edge or node row counts at time T when T is inside its validity interval; with no
# T, the current rows (invalid_at IS NULL).
_VALID_EDGE = sql.SQL(
    "(CASE WHEN %(as_of)s::timestamptz IS NULL THEN e.invalid_at IS NULL"
    " ELSE e.valid_at <= %(as_of)s AND (e.invalid_at IS NULL OR e.invalid_at > %(as_of)s) END)"
)
_VALID_NODE = sql.SQL(
    "(CASE WHEN %(as_of)s::timestamptz IS NULL THEN n.invalid_at IS NULL"
    " ELSE n.valid_at <= %(as_of)s AND (n.invalid_at IS NULL OR n.invalid_at > %(as_of)s) END)"
)


def _node_properties(node: TopologyNode) -> dict[str, Any]:
    if node.replaces is None:
        return node.properties
    return {**node.properties, "replaces": node.replaces}


class TopologyRepository(TenantScopedRepository):
    """Idempotent upserts, snapshot invalidation, and the reads traversals need."""

    def learned_graph(self) -> LearnedGraphRepository:
        """The learned graph's repository, on this repository's connection (resolved at each
        use where this repository's is: `TenantScopedRepository`)."""
        return LearnedGraphRepository(self._resolve_conn)

    # -- writes ------------------------------------------------------------------------

    def upsert(
        self,
        tenant_id: str,
        namespace: Namespace,
        nodes: Sequence[TopologyNode],
        edges: Sequence[TopologyEdge],
        now: datetime,
        *,
        sync: bool = False,
    ) -> dict[str, int]:
        """Record nodes then edges (re-discovery reinforces); with `sync`, close the rest.

        All or nothing: an edge naming an unknown node rejects the whole batch.
        """
        with self._tenant_scope(tenant_id) as cur:
            # alone against the tenant's learned writes (they share the lock): a node this
            # batch retires never gets a learned edge from a write it did not see
            cur.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (topology_lock(tenant_id),),
            )
            counts = self._upsert_nodes(cur, tenant_id, namespace, nodes, now)
            counts.update(self._upsert_edges(cur, tenant_id, namespace, edges, now))
            counts.update(self._close_replaced(cur, tenant_id, nodes, now))
            if sync:
                counts.update(self._invalidate_absent(cur, tenant_id, namespace, nodes, edges, now))
            return counts

    def _upsert_nodes(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        namespace: Namespace,
        nodes: Sequence[TopologyNode],
        now: datetime,
    ) -> dict[str, int]:
        unique: dict[str, TopologyNode] = {}
        for node in nodes:
            unique[node_key(tenant_id, node.node_type, node.external_id)] = node
        if not unique:
            return {"nodes_created": 0, "nodes_reinforced": 0}
        for key, node in unique.items():
            if node.valid_at is not None and node.valid_at > now:
                raise InvalidInputError("nodes.valid_at", f"{key} is valid from the future")
        cur.execute(
            "INSERT INTO topology_nodes (tenant_id, node_key, node_type, external_id, namespace,"
            " name, properties, valid_at, first_seen, last_seen)"
            " SELECT %(tenant)s, k, t, x, %(ns)s, nm, p, COALESCE(v, %(now)s), %(now)s, %(now)s"
            " FROM unnest(%(keys)s::text[], %(types)s::text[], %(ids)s::text[],"
            "             %(names)s::text[], %(props)s::jsonb[], %(valid)s::timestamptz[])"
            "   AS batch(k, t, x, nm, p, v)"
            " ON CONFLICT (tenant_id, node_key) WHERE invalid_at IS NULL DO UPDATE SET"
            "   last_seen = EXCLUDED.last_seen,"
            "   observed_count = topology_nodes.observed_count + 1,"
            # the topology claims a service an incident named first (a learned one), so
            # its syncs retire it like any other; an incident's own node stays learned
            # (a sync never closes what an incident taught)
            "   namespace = CASE WHEN EXCLUDED.namespace = 'topology'"
            "     AND topology_nodes.node_type <> %(incident)s THEN 'topology'"
            "     ELSE topology_nodes.namespace END,"
            "   name = COALESCE(EXCLUDED.name, topology_nodes.name),"
            "   properties = topology_nodes.properties || EXCLUDED.properties"
            " RETURNING (xmax = 0) AS created",
            {
                "tenant": tenant_id,
                "ns": namespace.value,
                "now": now,
                "keys": list(unique),
                "types": [n.node_type.value for n in unique.values()],
                "ids": [n.external_id for n in unique.values()],
                "names": [n.name for n in unique.values()],
                "props": [Jsonb(_node_properties(n)) for n in unique.values()],
                "valid": [n.valid_at for n in unique.values()],
                "incident": NodeType.INCIDENT.value,
            },
        )
        created = sum(1 for row in cur if row["created"])
        return {"nodes_created": created, "nodes_reinforced": len(unique) - created}

    def _close_replaced(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        nodes: Sequence[TopologyNode],
        now: datetime,
    ) -> dict[str, int]:
        """A node that `replaces` another retires it (and every edge touching it): a
        rename is one batch, whether or not it is a sync. The old node's learned edges
        are carried to the new one first."""
        # a node listed twice is recorded as its last listing says (`_upsert_nodes`): so
        # is what it replaces
        unique = {node_key(tenant_id, n.node_type, n.external_id): n for n in nodes}
        moves = {
            key: new
            for new, n in unique.items()
            if n.replaces is not None
            and (key := node_key(tenant_id, n.node_type, n.replaces)) not in unique
        }
        replaced = sorted(moves)
        if not replaced:
            return {}
        cur.execute(
            "UPDATE topology_nodes SET invalid_at = GREATEST(%(now)s, valid_at)"
            " WHERE tenant_id = %(tenant)s AND invalid_at IS NULL AND node_key = ANY(%(keys)s)"
            " RETURNING node_key",
            {"now": now, "tenant": tenant_id, "keys": replaced},
        )
        closed = [row["node_key"] for row in cur]
        # what incidents taught about the old name goes on under the new one
        carried = LearnedGraphRepository.carry_over(
            cur, tenant_id, {old: moves[old] for old in closed}, now
        )
        cur.execute(
            "UPDATE topology_edges SET invalid_at = GREATEST(%(now)s, valid_at)"
            " WHERE tenant_id = %(tenant)s AND invalid_at IS NULL"
            "   AND (source_key = ANY(%(closed)s) OR target_key = ANY(%(closed)s))",
            {"now": now, "tenant": tenant_id, "closed": closed},
        )
        return {"nodes_replaced": len(closed), "learned_edges_carried": carried}

    def _upsert_edges(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        namespace: Namespace,
        edges: Sequence[TopologyEdge],
        now: datetime,
    ) -> dict[str, int]:
        unique: dict[tuple[str, str, str], TopologyEdge] = {}
        for edge in edges:
            source = node_key(tenant_id, edge.source.node_type, edge.source.external_id)
            target = node_key(tenant_id, edge.target.node_type, edge.target.external_id)
            if source == target:
                raise InvalidInputError("edges", f"{source} cannot point at itself")
            unique[(source, edge.edge_type.value, target)] = edge
        if not unique:
            return {"edges_created": 0, "edges_reinforced": 0}
        endpoints = sorted({k for s, _, t in unique for k in (s, t)})
        cur.execute(
            "SELECT node_key FROM topology_nodes"
            " WHERE tenant_id = %s AND invalid_at IS NULL AND node_key = ANY(%s)",
            (tenant_id, endpoints),
        )
        known = {row["node_key"] for row in cur}
        missing = [k for k in endpoints if k not in known]
        if missing:
            raise InvalidInputError(
                "edges", f"{len(missing)} endpoint(s) are not current nodes, e.g. {missing[0]}"
            )
        cur.execute(
            "INSERT INTO topology_edges (tenant_id, source_key, edge_type, target_key, namespace,"
            " properties, valid_at, first_seen, last_seen)"
            " SELECT %(tenant)s, s, t, d, %(ns)s, p, COALESCE(v, %(now)s), %(now)s, %(now)s"
            " FROM unnest(%(sources)s::text[], %(types)s::text[], %(targets)s::text[],"
            "             %(props)s::jsonb[], %(valid)s::timestamptz[]) AS batch(s, t, d, p, v)"
            " ON CONFLICT (tenant_id, namespace, source_key, edge_type, target_key)"
            "   WHERE invalid_at IS NULL DO UPDATE SET"
            "   last_seen = EXCLUDED.last_seen,"
            "   observed_count = topology_edges.observed_count + 1,"
            "   properties = topology_edges.properties || EXCLUDED.properties"
            " RETURNING (xmax = 0) AS created",
            {
                "tenant": tenant_id,
                "ns": namespace.value,
                "now": now,
                "sources": [s for s, _, _ in unique],
                "types": [t for _, t, _ in unique],
                "targets": [d for _, _, d in unique],
                "props": [Jsonb(e.properties) for e in unique.values()],
                "valid": [e.valid_at for e in unique.values()],
            },
        )
        created = sum(1 for row in cur if row["created"])
        return {"edges_created": created, "edges_reinforced": len(unique) - created}

    def _invalidate_absent(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        namespace: Namespace,
        nodes: Sequence[TopologyNode],
        edges: Sequence[TopologyEdge],
        now: datetime,
    ) -> dict[str, int]:
        node_keys = [node_key(tenant_id, n.node_type, n.external_id) for n in nodes]
        edge_keys = [
            "|".join(
                (
                    node_key(tenant_id, e.source.node_type, e.source.external_id),
                    e.edge_type.value,
                    node_key(tenant_id, e.target.node_type, e.target.external_id),
                )
            )
            for e in edges
        ]
        cur.execute(
            "UPDATE topology_nodes SET invalid_at = GREATEST(%(now)s, valid_at)"
            " WHERE tenant_id = %(tenant)s AND namespace = %(ns)s AND invalid_at IS NULL"
            "   AND NOT (node_key = ANY(%(keys)s)) RETURNING node_key",
            {"now": now, "tenant": tenant_id, "ns": namespace.value, "keys": node_keys},
        )
        closed_nodes = [row["node_key"] for row in cur]
        # edges of this namespace the snapshot no longer has, and every edge (of any
        # namespace) touching a node that is gone: a path must never cross either
        cur.execute(
            "UPDATE topology_edges SET invalid_at = GREATEST(%(now)s, valid_at)"
            " WHERE tenant_id = %(tenant)s AND invalid_at IS NULL AND ("
            "   (namespace = %(ns)s AND NOT (source_key || '|' || edge_type || '|' || target_key"
            "        = ANY(%(edges)s)))"
            "   OR source_key = ANY(%(closed)s) OR target_key = ANY(%(closed)s))",
            {
                "now": now,
                "tenant": tenant_id,
                "ns": namespace.value,
                "edges": edge_keys,
                "closed": closed_nodes,
            },
        )
        return {"nodes_invalidated": len(closed_nodes), "edges_invalidated": cur.rowcount}

    # -- reads -------------------------------------------------------------------------

    def nodes(
        self, tenant_id: str, keys: Sequence[str], as_of: datetime | None
    ) -> dict[str, GraphNode]:
        """The nodes (valid at `as_of`, or current) among `keys`."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT n.node_key, n.node_type, n.external_id, n.name FROM topology_nodes n"
                    " WHERE n.tenant_id = %(tenant)s AND n.node_key = ANY(%(keys)s) AND "
                )
                + _VALID_NODE,
                {"tenant": tenant_id, "keys": list(keys), "as_of": as_of},
            )
            return {
                row["node_key"]: GraphNode(
                    node_type=row["node_type"], external_id=row["external_id"], name=row["name"]
                )
                for row in cur
            }

    def node_list(self, tenant_id: str, as_of: datetime | None, limit: int) -> list[GraphNode]:
        """The nodes (valid at `as_of`, or current) by type and id, at most `limit`."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT n.node_type, n.external_id, n.name FROM topology_nodes n"
                    " WHERE n.tenant_id = %(tenant)s AND "
                )
                + _VALID_NODE
                + sql.SQL(" ORDER BY n.node_type, n.external_id LIMIT %(limit)s"),
                {"tenant": tenant_id, "as_of": as_of, "limit": limit},
            )
            return [GraphNode.model_validate(row) for row in cur]

    def neighbours(
        self,
        tenant_id: str,
        frontier: Sequence[str],
        direction: Direction,
        edge_type: EdgeType,
        as_of: datetime | None,
    ) -> list[tuple[str, str]]:
        """(frontier node, neighbour) pairs over valid edges of one type, one hop."""
        near, far = (
            ("target_key", "source_key")
            if direction is Direction.DEPENDENTS
            else ("source_key", "target_key")
        )
        with self._tenant_scope(tenant_id) as cur:
            query = sql.SQL(
                "SELECT e.{near} AS origin, e.{far} AS node FROM topology_edges e"
                " WHERE e.tenant_id = %(tenant)s AND e.edge_type = %(type)s"
                "   AND e.{near} = ANY(%(frontier)s) AND "
            ).format(near=sql.Identifier(near), far=sql.Identifier(far))
            cur.execute(
                query + _VALID_EDGE,
                {
                    "tenant": tenant_id,
                    "type": edge_type.value,
                    "frontier": list(frontier),
                    "as_of": as_of,
                },
            )
            return [(row["origin"], row["node"]) for row in cur]

    def edges_of_type(
        self, tenant_id: str, edge_type: EdgeType, as_of: datetime | None
    ) -> list[tuple[str, str]]:
        """Every valid (source, target) edge of one type: the whole graph, for full walks."""
        with self._tenant_scope(tenant_id) as cur, cur.connection.cursor() as pairs:
            # plain tuples: tens of thousands of rows, no per-row dict
            pairs.execute(
                sql.SQL(
                    "SELECT e.source_key, e.target_key FROM topology_edges e"
                    " WHERE e.tenant_id = %(tenant)s AND e.edge_type = %(type)s AND "
                )
                + _VALID_EDGE,
                {"tenant": tenant_id, "type": edge_type.value, "as_of": as_of},
            )
            return [(source, target) for source, target in pairs]

    def graph_version(self, tenant_id: str) -> tuple[Any, ...]:
        """Changes whenever an edge is added or invalidated (reinforcement does not count)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT max(id) AS newest, max(invalid_at) AS closed, count(*) AS edges"
                " FROM topology_edges WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = cur.fetchone()
            assert row is not None
            return (row["newest"], row["closed"], row["edges"])

    def degree(self, tenant_id: str, key: str, as_of: datetime | None) -> int:
        """Valid edges of every type touching the node, both directions."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT count(*) AS degree FROM topology_edges e"
                    " WHERE e.tenant_id = %(tenant)s"
                    "   AND (e.source_key = %(key)s OR e.target_key = %(key)s) AND "
                )
                + _VALID_EDGE,
                {"tenant": tenant_id, "key": key, "as_of": as_of},
            )
            row = cur.fetchone()
            return 0 if row is None else int(row["degree"])
