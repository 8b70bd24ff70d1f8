"""The optional reranker stage: the fused candidates reordered by a cross-encoder before
the hits are chosen, under a hard deadline, and the fused order whenever it fails.

DESIGN's fusion (RRF, k = 60) still makes the candidates; a reranker only reorders the
first RERANK_DEPTH of them. It is off unless a deployment configures one
(`GRANDBO_RERANKER`); a timeout, an error or a malformed answer serves the fused order
and says so in the answer's metadata.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from grandbo.embedding.base import render_entry_text
from grandbo.embedding.rerank import Reranker, RerankError, checked_order
from grandbo.memory.domain.models import MemoryEntry
from grandbo.memory.read.deadline import DeadlineExceeded, call_with_deadline

_log = logging.getLogger(__name__)

RERANK_DEPTH = 25
MAX_RERANK_THREADS = 8
_RERANK_SLOTS = threading.BoundedSemaphore(MAX_RERANK_THREADS)


@dataclass(frozen=True, slots=True)
class Reranked:
    entries: list[MemoryEntry]
    status: str  # "off", "ok" or "unavailable" (the fused order was served)
    error: str | None = None


def rerank_entries(
    reranker: Reranker | None, topic: str, fused: Sequence[MemoryEntry], timeout_s: float
) -> Reranked:
    """`fused` with its first RERANK_DEPTH reordered by `reranker`; fused if it fails."""
    if reranker is None or len(fused) < 2:
        return Reranked(list(fused), "off" if reranker is None else "ok")
    head, tail = list(fused[:RERANK_DEPTH]), list(fused[RERANK_DEPTH:])
    texts = [render_entry_text(e.title, e.summary, e.service) for e in head]
    try:
        order = call_with_deadline(
            # its answer is checked here whatever the reranker: each index once, in range
            lambda: checked_order(
                list(reranker.rerank(topic, texts)), len(texts), source=reranker.name
            ),
            timeout_s,
            _RERANK_SLOTS,
            what=f"reranking with {reranker.name}",
            outstanding=MAX_RERANK_THREADS,
            thread_name="grandbo-rerank",
        )
    except (DeadlineExceeded, RerankError) as exc:
        _log.warning("reranker unavailable, serving the fused order: %s", exc)
        return Reranked(list(fused), "unavailable", str(exc))
    except Exception as exc:  # a reranker is another service: its bug never fails a query
        _log.exception("reranker failed, serving the fused order")
        return Reranked(list(fused), "unavailable", f"{type(exc).__name__}: {exc}")
    named = set(order)
    reordered = [head[i] for i in order] + [e for i, e in enumerate(head) if i not in named]
    return Reranked(reordered + tail, "ok")
