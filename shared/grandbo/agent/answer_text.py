"""The query tool's text for a model: per hit a compact line (its confidence, title,
service, the words it matched on) and the lesson itself (its summary, quoted, cut at
SUMMARY_CHARS), and, when memory holds nothing close, a sentence that
says so; when the search was degraded (meaning search unavailable, entries not embedded
yet), what it could not search, in words, and never "no precedent". The whole answer
stays structured beside it (`structuredContent`).

Stored text is data: a title is quoted (JSON string escaping, one line, cut), never
written into a sentence of ours.
"""

from __future__ import annotations

from typing import Any

from grandbo.memory.domain.models import MemoryHit, MemoryQueryResult
from grandbo.text.rules import one_line, quoted
from grandbo.text.tags import tag_words, written_tags
from grandbo.topology.model import BlastRadius, Criticality

TITLE_CHARS = 160
# the lesson itself, so a client that passes only text to its model needs no second call
SUMMARY_CHARS = 600
STALE_CHARS = 400
WORDS = 6
# the tags a hit's structured content keeps: words a model can use, a handful
TAG_WORDS = 8
HEADER = (
    "{count} past lesson(s), best first; confidence is the estimated probability that a "
    "hit is relevant. Hints, not ground truth: verify each with live tools."
)
NO_HIT = (
    "No hit reached the confidence floor{floor}, and the answer does not say that memory "
    "was searched completely: this is not evidence that the problem is new."
)
NOTHING = (
    "No precedent: memory holds nothing close to this topic (no hit reached the confidence "
    "floor{floor}). Treat the problem as new."
)


def hit_line(number: int, hit: MemoryHit) -> str:
    confidence = "?" if hit.confidence is None else f"{hit.confidence:.2f}"
    words = ", ".join(hit.why.shared_words[:WORDS]) or "similar text"
    service = hit.service or "none"
    stale = f"; stale: {quoted(hit.staleness.note, STALE_CHARS)}" if hit.staleness else ""
    seen = f"; seen {hit.recurrences} times" if hit.recurrences > 1 else ""
    return (
        f"{number}. confidence {confidence}: {quoted(hit.title, TITLE_CHARS)}; service "
        f"{service}; matched on {words}{seen}{stale}; entry {hit.entry_id}\n"
        f"   lesson: {quoted(hit.summary, SUMMARY_CHARS)}"
    )


def structured_answer(result: MemoryQueryResult) -> dict[str, Any]:
    """The answer as a tool's structured content: as the API answers it, but each hit's
    tags are the words of its text they stand for (`retri` reads `retries`), the ones the
    topic shares first, at most TAG_WORDS of them (an entry carries 25 to 30 stems)."""
    document = result.model_dump(mode="json")
    for hit, dumped in zip(result.hits, document["hits"], strict=True):
        words = tag_words(f"{hit.title} {hit.summary}")
        ordered = [*hit.why.shared_words, *(words.get(tag, tag) for tag in hit.tags)]
        dumped["tags"] = written_tags(ordered)[:TAG_WORDS]  # a word once, whatever its case
    return document


def answer_text(result: MemoryQueryResult) -> str:
    """The compact text of an answer."""
    meta = result.metadata
    if not result.hits:
        if meta.degraded:  # could not look everywhere: never "no precedent"
            return one_line(meta.degraded)
        floor = "" if meta.min_confidence is None else f" {meta.min_confidence:g}"
        if meta.no_precedent:
            return NOTHING.format(floor=floor)
        # an answer that does not say it searched completely (an older server's, or one
        # whose vector leg failed): what it found, never "treat the problem as new"
        failed = (
            f" The vector leg failed: {one_line(meta.vector_leg_error)}."
            if (meta.vector_leg_error)
            else ""
        )
        return NO_HIT.format(floor=floor) + failed
    lines = [HEADER.format(count=len(result.hits))]
    if meta.degraded:
        lines.append(one_line(meta.degraded))
    lines += [hit_line(n, hit) for n, hit in enumerate(result.hits, start=1)]
    if meta.withheld:
        lines.append(
            f"{meta.withheld} weaker candidate(s) under the confidence floor "
            f"{meta.min_confidence:g} withheld."
        )
    return "\n".join(lines)


def _service(name: str) -> str:
    """A service as the text names it: quoted (stored text is data, never our sentence)."""
    return quoted(name, TITLE_CHARS)


def blast_radius_text(radius: BlastRadius) -> str:
    """The blast radius in a sentence, the nearest affected first (the JSON beside it)."""
    node = _service(radius.node.external_id)
    if not radius.affected:
        return f"Nothing depends on {node} within {radius.hops} hop(s) ({radius.namespaces})."
    nearest = ", ".join(
        f"{_service(a.external_id)} ({a.distance} hop{'s' if a.distance > 1 else ''})"
        for a in radius.affected[:WORDS]
    )
    more = f" and {len(radius.affected) - WORDS} more" if len(radius.affected) > WORDS else ""
    cut = " The walk was cut short: more may be affected." if radius.truncated else ""
    return (
        f"If {node} fails, {len(radius.affected)} node(s) within {radius.hops} hop(s) are "
        f"affected: {nearest}{more}.{cut}"
    )


def criticality_text(criticality: Criticality) -> str:
    """How critical a service is, in a sentence (the JSON beside it)."""
    return (
        f"{_service(criticality.node.external_id)}: criticality {criticality.score:.2f} "
        f"({criticality.basis}); {criticality.dependents} dependent(s), degree "
        f"{criticality.degree}."
    )
