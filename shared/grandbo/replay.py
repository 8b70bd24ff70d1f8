"""A replay that cannot cheat: would Grandbo have helped on the day?

The post-mortems are replayed in the order their incidents happened (`metadata.time`).
For each incident that has a symptom query (what was known while it was open), memory is
queried holding only the incidents of earlier days, and the answer is scored on whether
it surfaces earlier incidents sharing one of its fine-grained root-cause labels; then the
day's incidents are written and embedded, and the replay moves on. No later incident is
ever in memory when an earlier one asks (the BM25 statistics and the vector leg's
candidates included), and every answer is checked against that before it is scored.
"""

from __future__ import annotations

import time
import uuid
from datetime import date, datetime
from itertools import groupby
from pathlib import Path
from typing import Any
from uuid import UUID

from grandbo.beir import load_corpus, load_qrels, load_queries
from grandbo.errors import InvalidInputError
from grandbo.evaluation import (
    MODES,
    ModeScores,
    ProgressFactory,
    add_documents,
    document_rankings,
    load_into_tenant,
    record_scores,
    score_ranking,
    timed_rank,
)
from grandbo.memory.service import MemoryService

DATE_FORMATS = ("%m/%d/%Y", "%Y-%m-%d")


def incident_date(doc: dict[str, Any]) -> date | None:
    """The day the incident happened, from `metadata.time` (MM/DD/YYYY or ISO)."""
    metadata = doc.get("metadata")
    raw = str((metadata.get("time") if isinstance(metadata, dict) else None) or "").strip()
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(raw, fmt).date()
        except ValueError:
            continue
    return None


def root_causes(doc: dict[str, Any]) -> set[str]:
    """Fine-grained root-cause labels: each label's full path (layer-1/layer-2/...)."""
    metadata = doc.get("metadata")
    labels = metadata.get("root_cause_labels") if isinstance(metadata, dict) else None
    if not isinstance(labels, list):
        return set()
    return {
        "/".join(str(label[key]) for key in sorted(label))
        for label in labels
        if isinstance(label, dict) and label
    }


class LaterIncidentInMemoryError(AssertionError):
    """The replay found a later incident in an earlier query's answer (a harness bug)."""


def run_replay(
    service: MemoryService,
    folder: Path,
    *,
    task: str = "symptom",
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    """Replay `folder`'s incidents in date order; returns the report."""
    wrap = progress or (lambda _description, _unit: lambda items, _total: items)
    malformed: list[str] = []
    corpus = load_corpus(folder, malformed)  # a repeated `_id` keeps its first document
    queries = {q.query_id: q for q in load_queries(folder, task, malformed)}
    # a symptom query names exactly one document: its own incident
    query_of_doc = {
        next(iter(docs)): queries[query_id]
        for query_id, docs in load_qrels(folder, task, malformed).items()
        if len(docs) == 1 and query_id in queries
    }
    undated = [doc["_id"] for doc in corpus if incident_date(doc) is None]
    dated = sorted(
        (doc for doc in corpus if incident_date(doc) is not None),
        key=lambda doc: (incident_date(doc), doc["_id"]),
    )
    tenant = f"replay-{uuid.uuid4().hex[:12]}"
    scores = {mode: ModeScores() for mode in MODES}
    in_memory: dict[str, date] = {}  # document id -> its day, for what memory holds
    docs_of_entry: dict[UUID, list[str]] = {}
    refused: list[str] = []
    skipped: list[str] = []
    without_history = 0
    answers: dict[str, list[str]] = {}
    started = time.perf_counter()
    days = [(day, list(group)) for day, group in groupby(dated, key=incident_date)]
    for day, incidents in wrap("replaying", "day")(days, len(days)):
        assert day is not None
        for doc in incidents:
            query = query_of_doc.get(doc["_id"])
            if query is None:
                continue
            causes = root_causes(doc)
            relevant = {  # never the incident itself, whatever its id says
                earlier["_id"]: 1
                for earlier in dated
                if earlier["_id"] in in_memory
                and earlier["_id"] != doc["_id"]
                and causes & root_causes(earlier)
            }
            if not relevant:
                without_history += 1
                continue
            try:
                ranked, timings = timed_rank(service, tenant, query.text)
            except InvalidInputError as exc:
                skipped.append(f"{query.query_id}: {exc}")
                continue
            rankings = document_rankings(service, tenant, query.text, ranked, docs_of_entry)
            later = {d for ranking in rankings.values() for d in ranking} - in_memory.keys()
            if later or any(in_memory[d] >= day for r in rankings.values() for d in r):
                raise LaterIncidentInMemoryError(
                    f"{query.query_id} on {day}: memory answered with {sorted(later)}"
                )
            answers[query.query_id] = rankings["hybrid"][:10]
            for mode, ranking in rankings.items():
                record_scores(scores[mode], score_ranking(ranking, relevant), timings[mode])
        # the day is over: its incidents join memory
        loaded = load_into_tenant(service, tenant, incidents, refused)
        service.embed_pending(tenant)
        add_documents(service, tenant, loaded, docs_of_entry)
        in_memory.update({doc: day for doc in loaded.values()})
    return {
        "dataset": folder.name,
        "task": f"replay/{task}",
        "provider": service.provider.embed_rev,
        "vector_cutoff": service.provider.vector_cutoff,
        "documents": len(corpus),
        "documents_undated": undated,
        "documents_refused": refused,
        "rows_malformed": malformed,
        "queries_scored": len(scores["hybrid"].recall_at_5),
        "queries_without_an_earlier_incident_of_their_cause": without_history,
        "queries_skipped": skipped,
        "seconds": round(time.perf_counter() - started, 1),
        "modes": {mode: s.summary() for mode, s in scores.items()},
        "answers": answers,
        "tenant": tenant,
    }
