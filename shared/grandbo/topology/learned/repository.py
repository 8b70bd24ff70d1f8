"""The learned graph's SQL: incidents recorded on the caller's transaction, correlations
read for scopes and walks, and the node and edge history staleness is judged from.

Same rules as the topology repository: every statement names its tenant, types reach SQL
only as bound values of whitelisted enums, nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from grandbo.storage.tenant_scope import Cursor, TenantScopedRepository
from grandbo.topology.model import EdgeType, Namespace, NodeType, node_key

_VALID_EDGE = sql.SQL(
    "(CASE WHEN %(as_of)s::timestamptz IS NULL THEN e.invalid_at IS NULL"
    " ELSE e.valid_at <= %(as_of)s AND (e.invalid_at IS NULL OR e.invalid_at > %(as_of)s) END)"
)
_LEARNED = Namespace.LEARNED.value
_AFFECTS = EdgeType.AFFECTS.value
_CORRELATES = EdgeType.CORRELATES_WITH.value
# the intervals NodeRow holds
_NODE_ROWS = sql.SQL(
    "SELECT node_key, external_id, valid_at, invalid_at, properties, first_seen FROM topology_nodes"
)
# a learned node met again keeps the earliest moment any incident gave it
_EARLIEST_NODE = sql.SQL(
    " ON CONFLICT (tenant_id, node_key) WHERE invalid_at IS NULL DO UPDATE SET"
    " valid_at = LEAST(topology_nodes.valid_at, EXCLUDED.valid_at),"
    " first_seen = LEAST(topology_nodes.first_seen, EXCLUDED.first_seen)"
    " WHERE topology_nodes.namespace = 'learned'"
)


def topology_lock(tenant_id: str) -> str:
    """The tenant's topology lock (a transaction-level advisory lock): batches take it
    alone, learned writes share it."""
    return f"grandbo.topology:{tenant_id}"


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One validity interval of a node."""

    node_key: str
    external_id: str
    valid_at: datetime
    invalid_at: datetime | None
    properties: dict[str, Any]
    first_seen: datetime | None = None  # when the topology first recorded it


@dataclass(frozen=True, slots=True)
class EdgeRow:
    """One validity interval of an edge."""

    source_key: str
    target_key: str
    valid_at: datetime
    invalid_at: datetime | None


class _Carried:
    """The learned rows a rename moves onto one key, merged."""

    def __init__(self, valid_at: datetime) -> None:
        self.valid_at = valid_at
        self.first_seen: datetime | None = None
        self.last_seen: datetime | None = None
        self.properties: dict[str, Any] = {}
        self.counts: list[int] = []
        self.existing: int | None = None  # the current row it lands on, if any

    def add(self, row: dict[str, Any]) -> None:
        self.properties.update(row["properties"] or {})
        first, last = row["first_seen"], row["last_seen"]
        self.first_seen = first if self.first_seen is None else min(self.first_seen, first)
        self.last_seen = last if self.last_seen is None else max(self.last_seen, last)
        self.counts.append(int(row["observed_count"]))


class LearnedGraphRepository(TenantScopedRepository):
    """Writes on a transaction the caller opened; reads in short scopes of their own."""

    # -- writes (on the memory write's cursor: one transaction with the entries) ---------

    @contextmanager
    def transaction(self, tenant_id: str) -> Iterator[Cursor]:
        """A transaction of the graph's own (a backfill from the events, not a write)."""
        with self._tenant_scope(tenant_id) as cur:
            yield cur

    @staticmethod
    def record_incident(
        cur: Cursor,
        tenant_id: str,
        incident_id: str,
        services: Sequence[str],
        at: datetime,
    ) -> dict[str, int]:
        """The Incident node, AFFECTS to each service, CORRELATES_WITH between each pair.

        Idempotent by construction: only an AFFECTS edge that is new reinforces a
        correlation, so a redelivery (or the same pair named twice) counts nothing; each
        correlation's count is the number of incidents that affected both. Incidents of
        one key are serialized (a transaction-level advisory lock), so two deliveries
        naming different services of one incident both see each other's edges, and a
        topology batch never runs beside one (`topology_lock`). Rows are written in key
        order, so concurrent incidents never deadlock on a pair.
        """
        incident_key = node_key(tenant_id, NodeType.INCIDENT, incident_id)
        ids = sorted(set(services))
        keys = [node_key(tenant_id, NodeType.SERVICE, s) for s in ids]
        # a topology batch of the tenant waits for this transaction (or this for it), so
        # it never retires a service between our check that it is current and our edge
        cur.execute(
            "SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0)),"
            " pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (topology_lock(tenant_id), f"grandbo.learned:{incident_key}"),
        )
        # a service the topology never knew becomes a learned node, valid from the first
        # incident that named it (whichever order they arrive in); one the topology knows
        # is left as it is, and one it retired stays retired (the lesson about it is
        # stale, not the retirement wrong)
        cur.execute(
            sql.SQL(
                "INSERT INTO topology_nodes (tenant_id, node_key, node_type, external_id,"
                " namespace, valid_at, first_seen, last_seen)"
                " SELECT %(tenant)s, s.k, %(service)s, s.x, %(ns)s, %(at)s, %(at)s, %(at)s"
                " FROM unnest(%(keys)s::text[], %(ids)s::text[]) AS s(k, x)"
                " WHERE NOT EXISTS (SELECT 1 FROM topology_nodes n"
                "   WHERE n.tenant_id = %(tenant)s AND n.node_key = s.k"
                "     AND (n.invalid_at IS NOT NULL OR n.namespace <> %(ns)s))"
                " ORDER BY s.k"
            )
            + _EARLIEST_NODE,
            {
                "tenant": tenant_id,
                "service": NodeType.SERVICE.value,
                "ns": _LEARNED,
                "at": at,
                "keys": keys,
                "ids": ids,
            },
        )
        cur.execute(
            sql.SQL(
                "INSERT INTO topology_nodes (tenant_id, node_key, node_type, external_id,"
                " namespace, valid_at, first_seen, last_seen)"
                " VALUES (%(tenant)s, %(key)s, %(incident)s, %(id)s, %(ns)s,"
                "   GREATEST(%(at)s, (SELECT max(c.invalid_at) FROM topology_nodes c"
                "     WHERE c.tenant_id = %(tenant)s AND c.node_key = %(key)s)),"
                "   %(at)s, %(at)s)"
            )
            + _EARLIEST_NODE,
            {
                "tenant": tenant_id,
                "key": incident_key,
                "incident": NodeType.INCIDENT.value,
                "id": incident_id,
                "ns": _LEARNED,
                "at": at,
            },
        )
        cur.execute(
            "INSERT INTO topology_edges (tenant_id, source_key, edge_type, target_key,"
            " namespace, valid_at, first_seen, last_seen)"
            " SELECT %(tenant)s, %(incident)s, %(affects)s, n.node_key, %(ns)s,"
            # an interval begins no earlier than the last one of its edge ended (a service
            # retired and listed again): no moment sees two
            "   GREATEST(%(at)s, (SELECT max(c.invalid_at) FROM topology_edges c"
            "     WHERE c.tenant_id = %(tenant)s AND c.source_key = %(incident)s"
            "       AND c.edge_type = %(affects)s AND c.target_key = n.node_key"
            "       AND c.namespace = %(ns)s)),"
            "   %(at)s, %(at)s"
            " FROM topology_nodes n WHERE n.tenant_id = %(tenant)s AND n.invalid_at IS NULL"
            "   AND n.node_key = ANY(%(keys)s)"
            " ORDER BY n.node_key"
            " ON CONFLICT (tenant_id, namespace, source_key, edge_type, target_key)"
            "   WHERE invalid_at IS NULL DO UPDATE SET"
            "   valid_at = LEAST(topology_edges.valid_at, EXCLUDED.valid_at),"
            "   first_seen = LEAST(topology_edges.first_seen, EXCLUDED.first_seen)"
            " RETURNING target_key, (xmax = 0) AS created",
            {
                "tenant": tenant_id,
                "incident": incident_key,
                "affects": _AFFECTS,
                "ns": _LEARNED,
                "at": at,
                "keys": keys,
            },
        )
        fresh = sorted(row["target_key"] for row in cur if row["created"])
        if not fresh:
            return {"affects_created": 0, "correlations_created": 0, "correlations_reinforced": 0}
        cur.execute(
            "SELECT e.target_key FROM topology_edges e"
            " WHERE e.tenant_id = %s AND e.namespace = %s AND e.source_key = %s"
            "   AND e.edge_type = %s AND e.invalid_at IS NULL",
            (tenant_id, _LEARNED, incident_key, _AFFECTS),
        )
        affected = sorted(row["target_key"] for row in cur)
        pairs = sorted({(min(a, b), max(a, b)) for a in fresh for b in affected if a != b})
        created = 0
        if pairs:
            cur.execute(
                "INSERT INTO topology_edges (tenant_id, source_key, edge_type, target_key,"
                " namespace, valid_at, first_seen, last_seen)"
                " SELECT %(tenant)s, p.a, %(correlates)s, p.b, %(ns)s,"
                "   GREATEST(%(at)s, (SELECT max(c.invalid_at) FROM topology_edges c"
                "     WHERE c.tenant_id = %(tenant)s AND c.source_key = p.a"
                "       AND c.edge_type = %(correlates)s AND c.target_key = p.b"
                "       AND c.namespace = %(ns)s)),"
                "   %(at)s, %(at)s"
                " FROM unnest(%(a)s::text[], %(b)s::text[]) AS p(a, b) ORDER BY p.a, p.b"
                " ON CONFLICT (tenant_id, namespace, source_key, edge_type, target_key)"
                "   WHERE invalid_at IS NULL DO UPDATE SET"
                "   observed_count = topology_edges.observed_count + 1,"
                "   valid_at = LEAST(topology_edges.valid_at, EXCLUDED.valid_at),"
                "   first_seen = LEAST(topology_edges.first_seen, EXCLUDED.first_seen),"
                "   last_seen = GREATEST(topology_edges.last_seen, EXCLUDED.last_seen)"
                " RETURNING (xmax = 0) AS created",
                {
                    "tenant": tenant_id,
                    "correlates": _CORRELATES,
                    "ns": _LEARNED,
                    "at": at,
                    "a": [a for a, _ in pairs],
                    "b": [b for _, b in pairs],
                },
            )
            created = sum(1 for row in cur if row["created"])
        return {
            "affects_created": len(fresh),
            "correlations_created": created,
            "correlations_reinforced": len(pairs) - created,
        }

    @staticmethod
    def lock_incidents(cur: Cursor, tenant_id: str, incident_ids: Sequence[str]) -> None:
        """The locks a write of these incidents takes (`record_incident`), in the order
        given: their incident ids' order, as `LearnedGraph.record_incidents` takes them."""
        cur.execute(
            "SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))",
            (topology_lock(tenant_id),),
        )
        for key in (node_key(tenant_id, NodeType.INCIDENT, i) for i in incident_ids):
            cur.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"grandbo.learned:{key}",),
            )

    @staticmethod
    def rekey_incident(cur: Cursor, tenant_id: str, incident_id: str, new_id: str) -> None:
        """Every interval of an Incident node, and every edge touching it, under `new_id`
        (a redaction: its digest must lead nowhere), its locks held (`lock_incidents`)."""
        old_key = node_key(tenant_id, NodeType.INCIDENT, incident_id)
        new_key = node_key(tenant_id, NodeType.INCIDENT, new_id)
        cur.execute(
            "UPDATE topology_nodes SET node_key = %s, external_id = %s"
            " WHERE tenant_id = %s AND node_key = %s",
            (new_key, new_id, tenant_id, old_key),
        )
        for column in ("source_key", "target_key"):
            cur.execute(
                sql.SQL(
                    "UPDATE topology_edges SET {c} = %s WHERE tenant_id = %s AND {c} = %s"
                ).format(c=sql.Identifier(column)),
                (new_key, tenant_id, old_key),
            )

    @staticmethod
    def carry_over(cur: Cursor, tenant_id: str, moves: dict[str, str], now: datetime) -> int:
        """What incidents taught about renamed nodes (old key -> new key) carried to the new
        names, from `now`, first and last seen kept (the old rows are closed with the old
        node). Returns the edges carried.

        Edges that land on one key are merged into one row (an old name and its new one
        may both be current, and two renames of one batch may meet on one pair): an
        AFFECTS edge stays one edge of its incident, and a correlation counts the
        incidents that affected both sides, each once, whichever names they used; where
        the AFFECTS edges cannot say (an incident node closed since), at most the sum of
        the counts merged and at least the largest of them."""
        if not moves:
            return 0
        old = sorted(moves)
        cur.execute(
            "SELECT source_key, edge_type, target_key, properties, valid_at, first_seen,"
            " last_seen, observed_count FROM topology_edges"
            " WHERE tenant_id = %s AND namespace = %s AND invalid_at IS NULL"
            "   AND (source_key = ANY(%s) OR target_key = ANY(%s))"
            " ORDER BY source_key, edge_type, target_key",
            (tenant_id, _LEARNED, old, old),
        )
        merged: dict[tuple[str, str, str], _Carried] = {}
        for row in cur.fetchall():
            source = str(moves.get(row["source_key"], row["source_key"]))
            target = str(moves.get(row["target_key"], row["target_key"]))
            if source == target:
                continue
            if row["edge_type"] == _CORRELATES:  # stored once, a < b
                source, target = min(source, target), max(source, target)
            carried = merged.setdefault(
                (source, row["edge_type"], target), _Carried(max(now, row["valid_at"]))
            )
            carried.add(row)
        if not merged:
            return 0
        keys = sorted(merged)
        # the current rows the carried ones meet, and every name's incidents
        cur.execute(
            "SELECT e.source_key, e.edge_type, e.target_key, e.observed_count"
            " FROM topology_edges e"
            " JOIN unnest(%s::text[], %s::text[], %s::text[]) AS k(s, t, d)"
            "   ON e.source_key = k.s AND e.edge_type = k.t AND e.target_key = k.d"
            " WHERE e.tenant_id = %s AND e.namespace = %s AND e.invalid_at IS NULL",
            (
                [s for s, _, _ in keys],
                [t for _, t, _ in keys],
                [d for _, _, d in keys],
                tenant_id,
                _LEARNED,
            ),
        )
        for row in cur.fetchall():
            merged[(row["source_key"], row["edge_type"], row["target_key"])].existing = int(
                row["observed_count"]
            )
        names: dict[str, set[str]] = {}  # a key as it will be -> the keys it was
        for name in {k for s, t, d in keys if t == _CORRELATES for k in (s, d)}:
            names.setdefault(name, {name})
        for before, after in moves.items():
            if after in names:
                names[after].add(before)
        incidents: dict[str, set[str]] = {}
        if names:
            cur.execute(
                "SELECT source_key, target_key FROM topology_edges"
                " WHERE tenant_id = %s AND namespace = %s AND edge_type = %s"
                "   AND invalid_at IS NULL AND target_key = ANY(%s)",
                (tenant_id, _LEARNED, _AFFECTS, sorted(set().union(*names.values()))),
            )
            for row in cur.fetchall():
                incidents.setdefault(row["target_key"], set()).add(row["source_key"])

        def incidents_of(key: str) -> set[str]:
            return set().union(*(incidents.get(name, set()) for name in names[key]))

        counts = {}
        for (source, edge_type, target), carried in merged.items():
            parts = carried.counts + ([] if carried.existing is None else [carried.existing])
            if edge_type == _CORRELATES:
                together = len(incidents_of(source) & incidents_of(target))
                counts[(source, edge_type, target)] = min(sum(parts), max(together, *parts))
            else:  # one incident's edge, however many names it reached
                counts[(source, edge_type, target)] = max(parts)
        cur.execute(
            "INSERT INTO topology_edges (tenant_id, source_key, edge_type, target_key,"
            " namespace, properties, valid_at, first_seen, last_seen, observed_count)"
            " SELECT %(tenant)s, c.s, c.t, c.d, %(ns)s, c.p, c.v, c.f, c.l, c.n"
            " FROM unnest(%(s)s::text[], %(t)s::text[], %(d)s::text[], %(p)s::jsonb[],"
            "   %(v)s::timestamptz[], %(f)s::timestamptz[], %(l)s::timestamptz[],"
            "   %(n)s::integer[]) AS c(s, t, d, p, v, f, l, n)"
            " ORDER BY c.s, c.t, c.d"
            " ON CONFLICT (tenant_id, namespace, source_key, edge_type, target_key)"
            "   WHERE invalid_at IS NULL DO UPDATE SET"
            "   observed_count = EXCLUDED.observed_count,"
            "   properties = topology_edges.properties || EXCLUDED.properties,"
            "   first_seen = LEAST(topology_edges.first_seen, EXCLUDED.first_seen),"
            "   last_seen = GREATEST(topology_edges.last_seen, EXCLUDED.last_seen)",
            {
                "tenant": tenant_id,
                "ns": _LEARNED,
                "s": [s for s, _, _ in keys],
                "t": [t for _, t, _ in keys],
                "d": [d for _, _, d in keys],
                "p": [Jsonb(merged[k].properties) for k in keys],
                "v": [merged[k].valid_at for k in keys],
                "f": [merged[k].first_seen for k in keys],
                "l": [merged[k].last_seen for k in keys],
                "n": [counts[k] for k in keys],
            },
        )
        return len(keys)

    # -- reads -------------------------------------------------------------------------

    def correlations(
        self, tenant_id: str, frontier: Sequence[str], as_of: datetime | None
    ) -> list[tuple[str, str, int]]:
        """(frontier node, correlated node, incidents together) over valid learned edges,
        both directions (a correlation has no direction; it is stored once, a < b)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT CASE WHEN e.source_key = ANY(%(frontier)s) THEN e.source_key"
                    "   ELSE e.target_key END AS origin,"
                    " CASE WHEN e.source_key = ANY(%(frontier)s) THEN e.target_key"
                    "   ELSE e.source_key END AS node, e.observed_count"
                    " FROM topology_edges e WHERE e.tenant_id = %(tenant)s"
                    "   AND e.namespace = %(ns)s AND e.edge_type = %(type)s"
                    "   AND (e.source_key = ANY(%(frontier)s) OR e.target_key = ANY(%(frontier)s))"
                    "   AND "
                )
                + _VALID_EDGE,
                {
                    "tenant": tenant_id,
                    "ns": _LEARNED,
                    "type": _CORRELATES,
                    "frontier": list(frontier),
                    "as_of": as_of,
                },
            )
            pairs = [(r["origin"], r["node"], int(r["observed_count"])) for r in cur]
            # an edge between two frontier nodes is a neighbour of each (a set: a walk's
            # frontier can be thousands of nodes, the edges read tens of thousands)
            among = set(frontier)
            pairs += [(b, a, n) for a, b, n in pairs if b in among and a in among]
            return pairs

    def all_correlations(self, tenant_id: str, as_of: datetime | None) -> list[tuple[str, str]]:
        """Every valid correlation (a, b), for whole-graph walks."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT e.source_key, e.target_key FROM topology_edges e"
                    " WHERE e.tenant_id = %(tenant)s AND e.namespace = %(ns)s"
                    "   AND e.edge_type = %(type)s AND "
                )
                + _VALID_EDGE,
                {"tenant": tenant_id, "ns": _LEARNED, "type": _CORRELATES, "as_of": as_of},
            )
            return [(row["source_key"], row["target_key"]) for row in cur]

    def node_history(
        self, tenant_id: str, keys: Sequence[str], until: datetime | None
    ) -> list[NodeRow]:
        """Every interval of these nodes that began by `until` (all of them without it)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                _NODE_ROWS
                + sql.SQL(
                    " WHERE tenant_id = %(tenant)s AND node_key = ANY(%(keys)s)"
                    "   AND (%(until)s::timestamptz IS NULL OR valid_at <= %(until)s)"
                    " ORDER BY node_key, valid_at"
                ),
                {"tenant": tenant_id, "keys": list(keys), "until": until},
            )
            return [NodeRow(**row) for row in cur]

    def successors(
        self,
        tenant_id: str,
        replaced: Sequence[str],
        owner_repo: Sequence[tuple[str, str]],
        as_of: datetime | None,
    ) -> list[NodeRow]:
        """Service nodes valid at `as_of` (or now) that say they replace one of
        `replaced` (external ids), or share an (owner, repo) pair with one."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT n.node_key, n.external_id, n.valid_at, n.invalid_at, n.properties,"
                " n.first_seen FROM topology_nodes n"
                " WHERE n.tenant_id = %(tenant)s AND n.node_type = %(type)s"
                "   AND (CASE WHEN %(as_of)s::timestamptz IS NULL THEN n.invalid_at IS NULL"
                "        ELSE n.valid_at <= %(as_of)s"
                "             AND (n.invalid_at IS NULL OR n.invalid_at > %(as_of)s) END)"
                "   AND (n.properties->>'replaces' = ANY(%(replaced)s)"
                "        OR (n.properties->>'owner', n.properties->>'repo') IN"
                "           (SELECT * FROM unnest(%(owners)s::text[], %(repos)s::text[])))"
                " ORDER BY n.external_id",
                {
                    "tenant": tenant_id,
                    "type": NodeType.SERVICE.value,
                    "as_of": as_of,
                    "replaced": list(replaced),
                    "owners": [o for o, _ in owner_repo],
                    "repos": [r for _, r in owner_repo],
                },
            )
            return [NodeRow(**row) for row in cur]

    def dependency_history(
        self, tenant_id: str, sources: Sequence[str], until: datetime | None
    ) -> list[EdgeRow]:
        """Every interval of the DEPENDS_ON edges out of `sources` begun by `until`."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT source_key, target_key, valid_at, invalid_at FROM topology_edges"
                " WHERE tenant_id = %(tenant)s AND edge_type = %(type)s"
                "   AND source_key = ANY(%(sources)s)"
                "   AND (%(until)s::timestamptz IS NULL OR valid_at <= %(until)s)"
                " ORDER BY source_key, target_key, valid_at",
                {
                    "tenant": tenant_id,
                    "type": EdgeType.DEPENDS_ON.value,
                    "sources": list(sources),
                    "until": until,
                },
            )
            return [EdgeRow(**row) for row in cur]

    def staleness_rows(
        self, tenant_id: str, keys: Sequence[str], until: datetime | None
    ) -> list[dict[str, Any]] | None:
        """What judging these nodes' staleness reads, in one self-scoped statement
        (`grandbo_staleness_rows`, `grandbo.topology.learned.prefetch`); None on a schema
        before migration 0027 (the statements answer the same)."""
        try:
            return self._tenant_statement(
                tenant_id,
                "SELECT * FROM grandbo_staleness_rows(%s, %s::text[], %s::timestamptz)",
                (tenant_id, list(keys), until),
            )
        except psycopg.errors.UndefinedFunction:
            return None

    def learned_incidents(
        self, tenant_id: str
    ) -> tuple[set[tuple[str, str]], dict[tuple[str, str], int]]:
        """Every learned AFFECTS (incident key, service key) pair ever recorded, and each
        correlated pair's largest count of one interval (a pair closed with a retired
        service and drawn again when it came back counts its incidents anew)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT source_key, edge_type, target_key, max(observed_count) AS n"
                " FROM topology_edges WHERE tenant_id = %s AND namespace = %s"
                "   AND edge_type IN (%s, %s) GROUP BY source_key, edge_type, target_key",
                (tenant_id, _LEARNED, _AFFECTS, _CORRELATES),
            )
            return _affects_and_correlations(cur)

    def current_learned(
        self, tenant_id: str
    ) -> tuple[set[tuple[str, str]], dict[tuple[str, str], int]]:
        """The current learned AFFECTS (incident key, service key) pairs and the current
        correlations' counts."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT source_key, edge_type, target_key, observed_count AS n"
                " FROM topology_edges WHERE tenant_id = %s AND namespace = %s"
                "   AND edge_type IN (%s, %s) AND invalid_at IS NULL",
                (tenant_id, _LEARNED, _AFFECTS, _CORRELATES),
            )
            return _affects_and_correlations(cur)

    def identity_history(
        self, tenant_id: str, owner_repo: Sequence[tuple[str, str]], until: datetime | None
    ) -> list[NodeRow]:
        """Every Service interval begun by `until` with one of these (owner, repo) pairs."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                _NODE_ROWS
                + sql.SQL(
                    " WHERE tenant_id = %(tenant)s AND node_type = %(type)s"
                    "   AND (%(until)s::timestamptz IS NULL OR valid_at <= %(until)s)"
                    "   AND (properties->>'owner', properties->>'repo') IN"
                    "       (SELECT * FROM unnest(%(owners)s::text[], %(repos)s::text[]))"
                    " ORDER BY node_key, valid_at"
                ),
                {
                    "tenant": tenant_id,
                    "type": NodeType.SERVICE.value,
                    "until": until,
                    "owners": [o for o, _ in owner_repo],
                    "repos": [r for _, r in owner_repo],
                },
            )
            return [NodeRow(**row) for row in cur]

    def retired_nodes(self, tenant_id: str, keys: Sequence[str]) -> set[str]:
        """Those of `keys` the graph had and has no longer (no current interval)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT node_key FROM topology_nodes WHERE tenant_id = %s AND node_key = ANY(%s)"
                " GROUP BY node_key HAVING bool_and(invalid_at IS NOT NULL)",
                (tenant_id, list(keys)),
            )
            return {row["node_key"] for row in cur}


def _affects_and_correlations(
    rows: Iterable[dict[str, Any]],
) -> tuple[set[tuple[str, str]], dict[tuple[str, str], int]]:
    """Learned edge rows (source_key, edge_type, target_key, n) as the AFFECTS pairs and
    the correlated pairs' counts."""
    affects: set[tuple[str, str]] = set()
    correlations: dict[tuple[str, str], int] = {}
    for row in rows:
        pair = (row["source_key"], row["target_key"])
        if row["edge_type"] == _AFFECTS:
            affects.add(pair)
        else:
            correlations[pair] = int(row["n"])
    return affects, correlations
