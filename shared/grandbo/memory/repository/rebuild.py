"""The projection from the events alone: `verify_projection` replays and compares,
`rebuild_projection` replaces the tenant's projection, statistics and postings.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any
from uuid import UUID

from psycopg import sql

from grandbo.memory.domain.models import (
    EntryStatus,
    EventType,
    Kind,
    Origin,
)
from grandbo.memory.domain.projection import ProjectedEntry, StoredEvent, replay
from grandbo.memory.repository.entries import EntryReads
from grandbo.memory.repository.postings import post_tags, title_flags
from grandbo.storage.tenant_scope import Cursor, Isolation, TenantLock
from grandbo.text.tags import spells_back

# a wrapper of the items a long step goes over, given their number (a bar on a terminal)
Progress = Callable[[Iterable[Any], int], Iterable[Any]]

# The projection's columns are the fold's fields (ProjectedEntry), one list both ways.
_PROJECTED = tuple(field.name for field in fields(ProjectedEntry))


def _column(value: Any) -> Any:
    """A folded value as its column holds it (enums as text, tuples as arrays)."""
    if isinstance(value, enum.Enum):
        return value.value
    return list(value) if isinstance(value, tuple) else value


def stored_events(cur: Cursor, tenant_id: str) -> list[StoredEvent]:
    """Every event of the tenant, in log order, as the fold reads them."""
    cur.execute(
        "SELECT event_id, entry_id, event_type, revision, payload, recorded_at"
        " FROM org_memory_events WHERE tenant_id = %s ORDER BY event_id",
        (tenant_id,),
    )
    return [
        StoredEvent(
            entry_id=row["entry_id"],
            event_type=EventType(row["event_type"]),
            revision=row["revision"],
            payload=row["payload"],
            recorded_at=row["recorded_at"],
            event_id=row["event_id"],
        )
        for row in cur
    ]


@dataclass(frozen=True, slots=True)
class ProjectionReport:
    tenant_id: str
    events: int
    entries: int
    mismatches: list[str]
    # events the fold cannot apply, left out of the replay (an earlier version's import
    # stored them): reported, never repaired by a rebuild (the log is append-only)
    unreplayable: list[str] = field(default_factory=list)


class ProjectionRebuild(EntryReads):
    """Replay a tenant's events into its projection, or check the projection against them."""

    def _events(self, cur: Cursor, tenant_id: str) -> list[StoredEvent]:
        return stored_events(cur, tenant_id)

    @staticmethod
    def _replayed(
        events: list[StoredEvent],
        progress: Progress | None = None,
        spelled_from: dict[UUID, tuple[str, ...]] | None = None,
    ) -> tuple[dict[UUID, ProjectedEntry], list[str]]:
        """The fold of the events, and what it had to leave out (reported, not raised);
        `progress` wraps the events as they are folded (a bar on a terminal);
        `spelled_from` gets the stems of the tags the fold spelled back (`replay`)."""
        unreplayable: list[str] = []
        folded = events if progress is None else progress(events, len(events))
        state = replay(
            folded,
            on_unreplayable=lambda problem: unreplayable.append(str(problem)),
            spelled_from=spelled_from,
        )
        return state, unreplayable

    @staticmethod
    def _spelled_as_kept(
        live: dict[UUID, ProjectedEntry],
        expected: dict[UUID, ProjectedEntry],
        spelled_from: dict[UUID, tuple[str, ...]],
    ) -> dict[UUID, ProjectedEntry]:
        """`expected`, where the fold spelled an entry's stems back and the projection
        keeps another spelling of the same stems: the kept one (spelled from words the
        lake held then, a redaction may have removed them since)."""
        kept = dict(expected)
        for entry_id, stems in spelled_from.items():
            now = live.get(entry_id)
            want = expected.get(entry_id)
            if (
                now is not None
                and want is not None
                and now.given_tags != want.given_tags
                and spells_back(now.given_tags, stems)
            ):
                kept[entry_id] = replace(want, given_tags=now.given_tags)
        return kept

    def _live(self, cur: Cursor, tenant_id: str) -> tuple[dict[UUID, ProjectedEntry], set[UUID]]:
        """The projection as stored, and the entries whose tags as written are not filled
        yet (NULL: stored before migration 0041, the backfill's work, not drift)."""
        cur.execute(
            sql.SQL("SELECT {} FROM org_memory_entries WHERE tenant_id = %s").format(
                sql.SQL(", ").join(map(sql.Identifier, _PROJECTED))
            ),
            (tenant_id,),
        )
        live = {}
        unfilled = set()
        for row in cur:
            row["tags"] = tuple(row["tags"])
            row["seen_in_incidents"] = tuple(row["seen_in_incidents"])
            row["origin"] = Origin(row["origin"])
            row["status"] = EntryStatus(row["status"])
            row["kind"] = Kind(row["kind"])
            given = row.pop("given_tags")
            if given is None:
                unfilled.add(row["entry_id"])
            live[row["entry_id"]] = ProjectedEntry(**row, given_tags=tuple(given or ()))
        return live, unfilled

    def _stats(self, cur: Cursor, tenant_id: str) -> tuple[dict[str, int], tuple[int, int]]:
        cur.execute(
            "SELECT tag, doc_count FROM org_memory_tag_stats"
            " WHERE tenant_id = %s AND doc_count > 0",
            (tenant_id,),
        )
        tags = {row["tag"]: row["doc_count"] for row in cur}
        cur.execute(
            "SELECT active_entries, active_tag_total FROM org_memory_tenant_stats"
            " WHERE tenant_id = %s",
            (tenant_id,),
        )
        row = cur.fetchone()
        totals = (0, 0) if row is None else (row["active_entries"], row["active_tag_total"])
        return tags, totals

    @staticmethod
    def _expected_stats(
        state: dict[UUID, ProjectedEntry],
    ) -> tuple[dict[str, int], tuple[int, int]]:
        counts: dict[str, int] = {}
        active = 0
        total = 0
        for entry in state.values():
            if entry.status is EntryStatus.ACTIVE:
                active += 1
                unique = set(entry.tags)
                total += len(unique)
                for tag in unique:
                    counts[tag] = counts.get(tag, 0) + 1
        return counts, (active, total)

    def verify_projection(self, tenant_id: str) -> ProjectionReport:
        """Replay the events and compare with the live projection and tag statistics."""
        with self._tenant_scope(tenant_id, isolation=Isolation.SNAPSHOT) as cur:
            events = self._events(cur, tenant_id)
            spelled_from: dict[UUID, tuple[str, ...]] = {}
            expected, unreplayable = self._replayed(events, spelled_from=spelled_from)
            live, unfilled = self._live(cur, tenant_id)
            for entry_id in unfilled & expected.keys():
                live[entry_id] = replace(live[entry_id], given_tags=expected[entry_id].given_tags)
            expected = self._spelled_as_kept(live, expected, spelled_from)
            mismatches = [
                f"entry {entry_id}: live {live.get(entry_id)!r} != replayed {want!r}"
                for entry_id, want in expected.items()
                if live.get(entry_id) != want
            ]
            mismatches += [
                f"entry {entry_id}: in the projection but in no event"
                for entry_id in live.keys() - expected.keys()
            ]
            if self._stats(cur, tenant_id) != self._expected_stats(expected):
                mismatches.append("tag statistics differ from the replayed entries")
            # a tombstone holds no vector (the removed text's, stored by an embed that
            # finished after the redaction, before migration 0028 refused it)
            cur.execute(
                "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s"
                " AND status = 'redacted' AND embedding IS NOT NULL ORDER BY entry_id",
                (tenant_id,),
            )
            mismatches += [
                f"entry {row['entry_id']}: a redacted entry holds a vector" for row in cur
            ]
            # compared as mappings, not in SQL's collation order; a flag not yet filled
            # (NULL, postings from before migration 0014) is the backfill's work, not drift
            cur.execute(
                "SELECT entry_id, array_agg(tag) AS tags, array_agg(in_title) AS in_title"
                " FROM org_memory_tag_postings WHERE tenant_id = %s GROUP BY entry_id",
                (tenant_id,),
            )
            posted: dict[UUID, dict[str, bool | None]] = {
                row["entry_id"]: dict(zip(row["tags"], row["in_title"], strict=True)) for row in cur
            }
            wanted: dict[UUID, dict[str, bool | None]] = {
                e.entry_id: {
                    tag: None if posted.get(e.entry_id, {}).get(tag, False) is None else in_title
                    for tag, in_title in title_flags(e.title, e.tags)
                }
                for e in expected.values()
                if e.status is EntryStatus.ACTIVE
            }
            if posted != wanted:
                mismatches.append("tag postings differ from the replayed active entries")
            return ProjectionReport(tenant_id, len(events), len(expected), mismatches, unreplayable)

    def fill_given_tags(self, tenant_id: str) -> int:
        """Fill the tags as written of the tenant's entries stored before migration 0041
        (NULL) with what a replay gives them (`projection.spell_back_given_tags`); returns
        how many. Under the tenant's write lock: no write lands between replay and fill."""
        unfilled_sql = (
            "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s AND given_tags IS NULL"
        )
        with self._tenant_scope(tenant_id) as cur:  # usually none: no lock taken
            cur.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attname = 'given_tags'"
                " AND attrelid = 'org_memory_entries'::regclass AND NOT attisdropped) AS ready"
            )
            ready = cur.fetchone()
            if not (ready and ready["ready"]):  # code deployed ahead of 0041: nothing to fill
                return 0
            cur.execute(unfilled_sql + " LIMIT 1", (tenant_id,))
            if cur.fetchone() is None:
                return 0
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            cur.execute(unfilled_sql, (tenant_id,))
            unfilled = [row["entry_id"] for row in cur]
            if not unfilled:
                return 0
            state, _ = self._replayed(self._events(cur, tenant_id))
            # only the revision replayed: a writer that does not hold the write lock (code
            # from before 0041) may have corrected it since, and its new revision is filled
            # by the next backfill, never with this one's tags
            filled = [
                (list(state[i].given_tags), tenant_id, i, state[i].revision)
                for i in unfilled
                if i in state
            ]
            cur.executemany(
                "UPDATE org_memory_entries SET given_tags = %s WHERE tenant_id = %s"
                " AND entry_id = %s AND revision = %s AND given_tags IS NULL",
                filled,
            )
            return len(filled)

    def rebuild_projection(
        self, tenant_id: str, *, progress: Progress | None = None
    ) -> ProjectionReport:
        """Replace the tenant's projection and statistics with a replay of its events.

        Vectors survive for entries whose revision is unchanged: they are derived from
        exactly that text. `progress` wraps the events as they are folded and the entries
        as they are written (`grandbo rebuild` shows each as a bar).
        """
        with self._tenant_scope(tenant_id, lock=TenantLock.EXCLUSIVE) as cur:
            events = self._events(cur, tenant_id)
            spelled_from: dict[UUID, tuple[str, ...]] = {}
            state, unreplayable = self._replayed(events, progress, spelled_from)
            if spelled_from:  # a spelling kept is not changed by a rebuild
                state = self._spelled_as_kept(self._live(cur, tenant_id)[0], state, spelled_from)
            entries = list(state.values())
            written = entries if progress is None else progress(entries, len(entries))
            cur.execute(
                "CREATE TEMP TABLE grandbo_kept_vectors ON COMMIT DROP AS"
                " SELECT entry_id, revision, embedding, embed_rev, embedded_revision, embedded_at"
                " FROM org_memory_entries WHERE tenant_id = %s AND embedding IS NOT NULL",
                (tenant_id,),
            )
            cur.execute("DELETE FROM org_memory_entries WHERE tenant_id = %s", (tenant_id,))
            cur.execute("DELETE FROM org_memory_tag_stats WHERE tenant_id = %s", (tenant_id,))
            cur.execute("DELETE FROM org_memory_tag_postings WHERE tenant_id = %s", (tenant_id,))
            cur.execute("DELETE FROM org_memory_tenant_stats WHERE tenant_id = %s", (tenant_id,))
            # COPY is refused under row-level security; executemany pipelines the inserts.
            cur.executemany(
                sql.SQL("INSERT INTO org_memory_entries (tenant_id, {}) VALUES (%s, {})").format(
                    sql.SQL(", ").join(map(sql.Identifier, _PROJECTED)),
                    sql.SQL(", ").join(sql.Placeholder() * len(_PROJECTED)),
                ),
                ((tenant_id, *(_column(getattr(e, name)) for name in _PROJECTED)) for e in written),
            )
            cur.execute(
                "UPDATE org_memory_entries e SET embedding = k.embedding, embed_rev = k.embed_rev,"
                " embedded_revision = k.embedded_revision, embedded_at = k.embedded_at"
                " FROM grandbo_kept_vectors k"
                " WHERE e.tenant_id = %s AND e.entry_id = k.entry_id"
                "   AND e.revision = k.embedded_revision AND e.status <> 'redacted'",
                (tenant_id,),
            )
            post_tags(cur, tenant_id, [e for e in state.values() if e.status is EntryStatus.ACTIVE])
            counts, (active, total) = self._expected_stats(state)
            cur.execute(
                "INSERT INTO org_memory_tag_stats (tenant_id, tag, doc_count)"
                " SELECT %s, tag, n FROM unnest(%s::text[], %s::int[]) AS s(tag, n)",
                (tenant_id, list(counts), list(counts.values())),
            )
            cur.execute(
                "INSERT INTO org_memory_tenant_stats (tenant_id, active_entries, active_tag_total)"
                " VALUES (%s, %s, %s)",
                (tenant_id, active, total),
            )
            return ProjectionReport(tenant_id, len(events), len(state), [], unreplayable)
