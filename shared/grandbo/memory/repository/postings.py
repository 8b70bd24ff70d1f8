"""The inverted tag index the lexical leg reads: one posting per (entry, tag), written in
the same transaction as the projection, and whether the entry's title carries the tag
(field weighting: a title tag counts as said TITLE_TAG_TF times, docs/EVAL.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from grandbo.memory.repository.entries import EntryReads
from grandbo.storage.tenant_scope import Cursor
from grandbo.text.tags import tokenize

# BM25's term frequency for a tag the title carries (every other tag: 1). Measured on
# both development corpora (bench/experiments/rank_depth.py): the only change of the leg that lifted
# hybrid MRR@10 on both without dropping the mechanism task.
TITLE_TAG_TF = 3.0


class Postable(Protocol):
    """What a posting is made from: a projected entry or a stored one."""

    @property
    def entry_id(self) -> UUID: ...
    @property
    def title(self) -> str: ...
    @property
    def index_tags(self) -> Sequence[str]: ...
    @property
    def service(self) -> str | None: ...
    @property
    def updated_at(self) -> datetime: ...


def title_flags(title: str, tags: Sequence[str]) -> list[tuple[str, bool]]:
    """The entry's distinct tags, sorted, each with whether its title carries it."""
    in_title = set(tokenize(title))
    return [(tag, tag in in_title) for tag in sorted(set(tags))]


def post_tags(cur: Cursor, tenant_id: str, entries: Sequence[Postable]) -> None:
    """The entries' tags into the inverted index (one statement)."""
    rows = [
        (tag, entry.entry_id, len(flags), entry.service, entry.updated_at, in_title)
        for entry in entries
        for flags in [title_flags(entry.title, entry.index_tags)]
        for tag, in_title in flags
    ]
    if not rows:
        return
    tags, ids, counts, services, updated, titled = (
        list(column) for column in zip(*rows, strict=True)
    )
    cur.execute(
        "INSERT INTO org_memory_tag_postings"
        " (tenant_id, tag, entry_id, tag_count, service, updated_at, in_title)"
        " SELECT %s, p.* FROM unnest(%s::text[], %s::uuid[], %s::int[], %s::text[],"
        " %s::timestamptz[], %s::boolean[]) AS p",
        (tenant_id, tags, ids, counts, services, updated, titled),
    )


def unpost_tags(cur: Cursor, tenant_id: str, entry_id: UUID) -> None:
    cur.execute(
        "DELETE FROM org_memory_tag_postings WHERE tenant_id = %s AND entry_id = %s",
        (tenant_id, entry_id),
    )


class TitleTagBackfill(EntryReads):
    """Postings written before migration 0014 do not know whether the title carries their
    tag (NULL: ranked as a body tag); this fills them from the entries' titles."""

    def mark_title_tags(self, tenant_id: str, limit: int) -> int:
        """Fill the title flag of up to `limit` entries' postings; returns how many entries
        this call filled (another run filling the same ones meanwhile counts there)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT e.entry_id, e.title, array_agg(p.tag) AS tags"
                " FROM (SELECT DISTINCT entry_id FROM org_memory_tag_postings"
                "       WHERE tenant_id = %(tenant)s AND in_title IS NULL LIMIT %(limit)s) u"
                " JOIN org_memory_entries e ON e.tenant_id = %(tenant)s AND e.entry_id = u.entry_id"
                " JOIN org_memory_tag_postings p"
                "   ON p.tenant_id = %(tenant)s AND p.entry_id = u.entry_id"
                " GROUP BY e.entry_id, e.title",
                {"tenant": tenant_id, "limit": limit},
            )
            rows = [(row["entry_id"], title_flags(row["title"], row["tags"])) for row in cur]
            marked = 0
            for entry_id, flags in rows:
                # only flags still unknown: a correction since the read above wrote its own
                # postings (from its own title) and must not get the old title's flags
                cur.execute(
                    "UPDATE org_memory_tag_postings p SET in_title = f.in_title"
                    " FROM unnest(%s::text[], %s::boolean[]) AS f(tag, in_title)"
                    " WHERE p.tenant_id = %s AND p.entry_id = %s AND p.tag = f.tag"
                    "   AND p.in_title IS NULL",
                    ([t for t, _ in flags], [f for _, f in flags], tenant_id, entry_id),
                )
                marked += cur.rowcount > 0
            return marked
