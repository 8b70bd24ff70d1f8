"""Retrieval evaluation over a BEIR-format folder, through the real query path.

The corpus is written into a throwaway tenant through `MemoryService.record_entry`,
embedded through `embed_pending`, and every query goes through `MemoryService.rank`: the
same SQL, tokenizer, provider and fusion that `query_org_memory` uses. Lexical-only and
vector-only rankings are the two legs of that same call; hybrid is their RRF fusion, as
served: hits that say one thing collapsed into the best (`grandbo.memory.vectors.consolidation`).
A document merged into another entry as its recurrence counts where that entry ranks.
A document the entry contract refuses (an empty description) is reported and left out.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from grandbo.beir import OWN_SHAPE, load_corpus, load_qrels, load_shapes
from grandbo.errors import InvalidInputError, invalid_input_from
from grandbo.memory.domain.fusion import FusedRank
from grandbo.memory.domain.idempotency import KeySpace, idempotency_key
from grandbo.memory.domain.models import NewEntry, Origin, WriteContext
from grandbo.memory.domain.topic import validate_topic
from grandbo.memory.read.recall import RankedCandidates, fuse
from grandbo.memory.read.reranking import rerank_entries
from grandbo.memory.repository import SearchLegs
from grandbo.memory.service import MemoryService

MODES = ("lexical", "vector", "hybrid", "confidence")
IGNORE_OWN = ("auto", "yes", "no")
#: (description, unit) -> a wrapper of an iterable of a known length (a progress bar)
ProgressFactory = Callable[[str, str], Callable[[Iterable[Any], int], Iterable[Any]]]


@dataclass
class ModeScores:
    recall_at_5: list[float] = field(default_factory=list)
    capped_recall_at_5: list[float] = field(default_factory=list)
    recall_at_10: list[float] = field(default_factory=list)
    mrr_at_10: list[float] = field(default_factory=list)
    ndcg_at_10: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        def mean(values: list[float]) -> float:
            return round(statistics.fmean(values), 4) if values else 0.0

        latencies = sorted(self.latency_ms)
        return {
            "recall@5": mean(self.recall_at_5),
            "capped_recall@5": mean(self.capped_recall_at_5),
            "recall@10": mean(self.recall_at_10),
            "mrr@10": mean(self.mrr_at_10),
            "ndcg@10": mean(self.ndcg_at_10),
            "latency_p50_ms": round(_percentile(latencies, 50), 2),
            "latency_p95_ms": round(_percentile(latencies, 95), 2),
        }


def _percentile(sorted_values: Sequence[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, math.ceil(pct / 100 * len(sorted_values)) - 1)
    return sorted_values[max(index, 0)]


def score_ranking(ranking: Sequence[str], relevant: dict[str, int]) -> tuple[float, ...]:
    """recall@5, recall@10, MRR@10, nDCG@10 and capped recall@5 of one ranked doc-id list.

    Capped recall (BEIR's R_cap) divides by min(relevant, k): with 16 relevant documents,
    plain recall@5 can reach at most 0.31, capped recall 1.0.
    """
    total = len(relevant)
    hits5 = sum(1 for d in ranking[:5] if d in relevant)
    recall5 = hits5 / total
    recall10 = sum(1 for d in ranking[:10] if d in relevant) / total
    mrr = next((1.0 / i for i, d in enumerate(ranking[:10], start=1) if d in relevant), 0.0)
    dcg = sum(
        (2 ** relevant[d] - 1) / math.log2(i + 1)
        for i, d in enumerate(ranking[:10], start=1)
        if d in relevant
    )
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    return recall5, recall10, mrr, (dcg / idcg if idcg else 0.0), hits5 / min(total, 5)


def entry_text(doc: dict[str, Any]) -> tuple[str, str]:
    """The title and summary a corpus document is written with."""
    title = (doc.get("title") or doc["_id"]).strip()[:300]
    return title, (doc.get("text") or "").strip()[:20_000]


def load_into_tenant(
    service: MemoryService,
    tenant: str,
    corpus: Iterable[dict[str, Any]],
    refused: list[str] | None = None,
) -> dict[UUID, str]:
    """Write every document as an entry of `tenant`; return entry id -> document id.
    A document the entry contract refuses is appended to `refused` (id: reason)."""
    doc_of_entry: dict[UUID, str] = {}
    for doc in corpus:
        title, summary = entry_text(doc)
        try:
            entry = NewEntry(title=title, summary=summary, origin=Origin.INCIDENT)
            context = WriteContext(
                actor="grandbo-eval", idempotency_key=idempotency_key(KeySpace.EVAL, doc["_id"])
            )
        except ValidationError as exc:
            if refused is None:
                raise
            problem = invalid_input_from(exc)
            refused.append(f"{doc['_id']}: {problem.field}: {problem.message}")
            continue
        outcome = service.record_entry(tenant, entry, context)
        doc_of_entry[outcome.entry.entry_id] = doc["_id"]
    return doc_of_entry


def add_documents(
    service: MemoryService,
    tenant: str,
    doc_of_entry: dict[UUID, str],
    docs_of_entry: dict[UUID, list[str]],
) -> int:
    """Add newly loaded entries to `docs_of_entry` (entry -> the documents it stands for:
    its own, and those merged into it as its recurrences); returns how many merged."""
    merged = 0
    for entry_id, doc in doc_of_entry.items():
        if entry_id in docs_of_entry:
            continue
        into = service.get_entry(tenant, entry_id).merged_into
        if into is None:
            docs_of_entry[entry_id] = [doc]
        else:
            docs_of_entry.setdefault(into, []).append(doc)
            merged += 1
    return merged


def timed_rank(
    service: MemoryService, tenant: str, text: str
) -> tuple[RankedCandidates, dict[str, float]]:
    """Hybrid candidates for `text`, and each mode's latency (the legs run alone too)."""
    validate_topic(text)  # the same contract query_org_memory enforces
    timings: dict[str, float] = {}
    for mode in ("lexical", "vector"):
        t0 = time.perf_counter()
        service.rank(tenant, text, use_lexical=mode == "lexical", use_vector=mode == "vector")
        timings[mode] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    ranked = service.rank(tenant, text)
    timings["hybrid"] = timings["confidence"] = (time.perf_counter() - t0) * 1000
    return ranked, timings


def documents(
    ids: Sequence[UUID], docs_of_entry: dict[UUID, list[str]], own: str | None = None
) -> list[str]:
    """Entries as the documents they stand for, in order, `own` left out."""
    return [d for i in ids for d in docs_of_entry[i] if d != own]


def only_as(
    own: str | None, ids: Sequence[UUID], docs_of_entry: dict[UUID, list[str]]
) -> set[UUID]:
    """The entries among `ids` that stand for the document `own` alone."""
    return {entry_id for entry_id in ids if docs_of_entry[entry_id] == [own]}


def fuse_without(legs: SearchLegs, excluded: set[UUID]) -> list[FusedRank[UUID]]:
    """The legs fused as if memory did not hold the `excluded` entries."""
    kept = dataclasses.replace(
        legs,
        lexical=[c for c in legs.lexical if c.entry_id not in excluded],
        vector=[c for c in legs.vector if c.entry_id not in excluded],
    )
    return fuse(kept)


def fused_without(legs: SearchLegs, excluded: set[UUID]) -> list[UUID]:
    """The candidates' order as if memory did not hold the `excluded` entries."""
    return [f.key for f in fuse_without(legs, excluded)]


def document_rankings(
    service: MemoryService,
    tenant: str,
    topic: str,
    ranked: RankedCandidates,
    docs_of_entry: dict[UUID, list[str]],
    own: str | None = None,
    reranker_failures: list[str] | None = None,
) -> dict[str, list[str]]:
    """Each mode's ranking as documents: the two legs, and hybrid as the query serves it
    (every candidate, hits saying one thing collapsed), `own` left out.

    `own` is the query itself: hybrid is fused as if memory did not hold it, so it
    neither takes a candidate's place nor sets the best scores the fusion divides by (a
    topic Beacon sends is never an entry of memory word for word)."""
    alone = only_as(own, ranked.fused, docs_of_entry)
    fused = fused_without(ranked.legs, alone) if alone else ranked.fused
    reranked = rerank_entries(
        service.reranker,
        topic,
        [ranked.legs.entries[i] for i in fused],
        service.rerank_timeout_s,
    )
    if reranked.error is not None and reranker_failures is not None:
        reranker_failures.append(reranked.error)
    served = service.collapse(tenant, reranked.entries, ranked.serving, len(fused))
    # the same candidates ordered by the serving model's confidence (no floor: a ranking)
    model = service.confidence_model(ranked.serving, tenant)
    confidence = model.confidences(fused, ranked.legs, ranked.topic_tags, ranked.vector_cutoff)
    by_confidence = service.collapse(
        tenant,
        [ranked.legs.entries[i] for i in model.order(fused, confidence)],
        ranked.serving,
        len(fused),
    )
    return {
        "lexical": documents([c.entry_id for c in ranked.legs.lexical], docs_of_entry, own),
        "vector": documents([c.entry_id for c in ranked.legs.vector], docs_of_entry, own),
        "hybrid": documents(
            [e.entry_id for lesson in served for e in lesson.entries], docs_of_entry, own
        ),
        "confidence": documents(
            [e.entry_id for lesson in by_confidence for e in lesson.entries], docs_of_entry, own
        ),
    }


def run_eval(
    service: MemoryService,
    folder: Path,
    task: str,
    *,
    cutoffs: Sequence[float] = (),
    ignore_own: str = "auto",
    progress: ProgressFactory | None = None,
    calibrate: bool = False,
    shapes: Path | None = None,
) -> dict[str, Any]:
    """Load, embed, query and score; returns the report (also the JSON output).

    `shapes`: a folder of the same queries rewritten in other shapes (`load_shapes`),
    each scored on the same load, reported beside the set's own (`report["shapes"]`).

    `ignore_own` (BEIR's ignore_identical_ids): the corpus document whose id is the
    query's own id is the query itself. "auto" ignores it unless the qrels name it as
    relevant (the data decides: `mechanism` and `duplicate` queries are corpus documents,
    `symptom` queries are not); "yes" always ignores it, "no" never does.
    """
    if ignore_own not in IGNORE_OWN:
        raise ValueError(f"ignore_own must be one of {IGNORE_OWN}, got {ignore_own!r}")
    wrap = progress or (lambda _description, _unit: lambda items, _total: items)
    malformed: list[str] = []  # rows of the folder's files that could not be read
    corpus = load_corpus(folder, malformed)
    by_shape = load_shapes(folder, task, shapes, malformed)
    qrels = load_qrels(folder, task, malformed)
    tenant = f"eval-{uuid.uuid4().hex[:12]}"
    started = time.perf_counter()
    refused: list[str] = []
    doc_of_entry = load_into_tenant(
        service, tenant, wrap("loading", "doc")(corpus, len(corpus)), refused
    )
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    embedded = service.embed_pending(tenant, progress=wrap("embedding", "batch"))
    embed_s = time.perf_counter() - started
    docs_of_entry: dict[UUID, list[str]] = {}
    merged = add_documents(service, tenant, doc_of_entry, docs_of_entry)
    loaded = set(doc_of_entry.values())  # a qrel naming any other document cannot be found
    unfindable = 0

    by_mode = {shape: {mode: ModeScores() for mode in MODES} for shape in by_shape}
    scores = by_mode[OWN_SHAPE]
    sweeps: dict[float, ModeScores] = {c: ModeScores() for c in cutoffs}
    skipped: list[str] = []
    reranker_failures: list[str] = []
    distances_relevant: list[float] = []
    asked = [(shape, query) for shape, queries in by_shape.items() for query in queries]
    for shape, query in wrap("querying", "query")(asked, len(asked)):
        named = qrels.get(query.query_id, {})
        own_ignored = ignore_own == "yes" or (ignore_own == "auto" and query.query_id not in named)
        own = query.query_id if own_ignored else None  # the document left out of rankings
        relevant = {d: g for d, g in named.items() if d != own and d in loaded}
        if shape == OWN_SHAPE:
            unfindable += sum(1 for d in named if d != own and d not in loaded)
        if not relevant:
            if named.keys() - {own} and shape == OWN_SHAPE:  # only documents memory lacks
                skipped.append(f"{query.query_id}: its relevant documents are not in memory")
            continue
        try:
            ranked, timings = timed_rank(service, tenant, query.text)
        except InvalidInputError as exc:
            skipped.append(f"{query.query_id} ({shape}): {exc}")
            continue

        rankings = document_rankings(
            service, tenant, query.text, ranked, docs_of_entry, own, reranker_failures
        )
        for mode, ranking in rankings.items():
            record_scores(by_mode[shape][mode], score_ranking(ranking, relevant), timings[mode])
        if shape != OWN_SHAPE:
            continue  # the sweep and the distances are the set's own queries'
        for candidate in ranked.legs.vector:
            if relevant.keys() & set(docs_of_entry[candidate.entry_id]):
                distances_relevant.append(candidate.distance)
        for cutoff, sweep in sweeps.items():
            kept = [c for c in ranked.legs.vector if c.distance < cutoff]
            fused = fused_without(
                dataclasses.replace(ranked.legs, vector=kept),
                only_as(own, ranked.fused, docs_of_entry),
            )
            ranking = documents(fused, docs_of_entry, own)
            record_scores(sweep, score_ranking(ranking, relevant), 0.0)

    report: dict[str, Any] = {
        "dataset": folder.name,
        "task": task,
        "provider": service.provider.embed_rev,
        "vector_cutoff": service.provider.vector_cutoff,
        "documents": len(corpus),
        "documents_refused": refused,
        "rows_malformed": malformed,
        "relevant_documents_not_in_memory": unfindable,
        "entries_merged_as_recurrences": merged,
        "duplicate_distance": service.provider.duplicate_distance,
        "reranker": None if service.reranker is None else service.reranker.name,
        "reranker_failures": len(reranker_failures),
        "reranker_first_failure": reranker_failures[0] if reranker_failures else None,
        "queries_scored": len(scores["hybrid"].recall_at_5),
        "queries_skipped": skipped,
        "entries_embedded": embedded,
        "load_seconds": round(load_s, 2),
        "embed_seconds": round(embed_s, 2),
        "modes": {mode: s.summary() for mode, s in scores.items()},
        "tenant": tenant,
    }
    if len(by_mode) > 1:
        report["shapes"] = {
            shape: {
                "queries_scored": len(modes["hybrid"].recall_at_5),
                "modes": {mode: s.summary() for mode, s in modes.items()},
            }
            for shape, modes in by_mode.items()
        }
    if sweeps:
        report["cutoff_sweep"] = {
            str(c): {k: v for k, v in s.summary().items() if not k.startswith("latency")}
            for c, s in sweeps.items()
        }
    if calibrate:  # measured after scoring: the figures above are at the default cutoff
        try:
            report["calibration"] = service.calibrate(tenant, sample=200).as_dict()
        except InvalidInputError as exc:
            report["calibration_error"] = exc.message
    if distances_relevant:
        ordered = sorted(distances_relevant)
        report["relevant_distance_p50_p95"] = [
            round(_percentile(ordered, 50), 4),
            round(_percentile(ordered, 95), 4),
        ]
    return report


def record_scores(scores: ModeScores, values: tuple[float, ...], latency_ms: float) -> None:
    scores.recall_at_5.append(values[0])
    scores.recall_at_10.append(values[1])
    scores.mrr_at_10.append(values[2])
    scores.ndcg_at_10.append(values[3])
    scores.capped_recall_at_5.append(values[4])
    scores.latency_ms.append(latency_ms)


def format_table(report: dict[str, Any]) -> str:
    lines = [
        f"{report['dataset']} / {report['task']}: {report['queries_scored']} queries, "
        f"{report['documents']} documents, provider {report['provider']}, "
        f"cutoff {report['vector_cutoff']}",
        f"{'mode':<8} {'R@5':>7} {'R@10':>7} {'MRR@10':>7} {'nDCG@10':>8} {'Rcap@5':>7}"
        f" {'p50 ms':>8} {'p95 ms':>8}",
    ]
    for mode, s in report["modes"].items():
        lines.append(
            f"{mode:<8} {s['recall@5']:>7.4f} {s['recall@10']:>7.4f} {s['mrr@10']:>7.4f} "
            f"{s['ndcg@10']:>8.4f} {s['capped_recall@5']:>7.4f} "
            f"{s['latency_p50_ms']:>8.2f} {s['latency_p95_ms']:>8.2f}"
        )
    if report.get("rows_malformed"):
        lines.append(
            f"rows that could not be read (left out): {len(report['rows_malformed'])}, "
            f"e.g. {report['rows_malformed'][0]}"
        )
    if report.get("relevant_documents_not_in_memory"):
        lines.append(
            "relevant documents named by the qrels but not in memory (unknown or refused; "
            f"not counted): {report['relevant_documents_not_in_memory']}"
        )
    if report.get("documents_refused"):
        lines.append(
            f"documents refused by the entry contract (left out): "
            f"{len(report['documents_refused'])}, e.g. {report['documents_refused'][0]}"
        )
    if "entries_merged_as_recurrences" in report:
        lines.append(
            f"entries merged as recurrences: {report['entries_merged_as_recurrences']} "
            f"(duplicate distance {report.get('duplicate_distance')})"
        )
    if "queries_without_an_earlier_incident_of_their_cause" in report:
        lines.append(
            "replayed in date order; queries with no earlier incident of their cause (not "
            f"scored): {report['queries_without_an_earlier_incident_of_their_cause']}"
        )
    if report.get("calibration"):
        c = report["calibration"]
        lines.append(
            f"calibrated cutoff (no labels, {c['sample_size']} entries): {c['vector_cutoff']} "
            f"(own p50/p95 {c['own_p50']}/{c['own_p95']}, other p5/p50 "
            f"{c['other_p5']}/{c['other_p50']}, separation {c['separation']})"
        )
    if report.get("calibration_error"):
        lines.append(f"not calibrated: {report['calibration_error']}")
    if report.get("reranker"):
        lines.append(
            f"hybrid reranked by {report['reranker']}; it failed (fused order served) for "
            f"{report['reranker_failures']} queries"
            + (f", e.g. {report['reranker_first_failure']}" if report["reranker_failures"] else "")
        )
    if report.get("queries_skipped"):
        lines.append(f"skipped by the topic contract: {len(report['queries_skipped'])}")
    for shape, figures in report.get("shapes", {}).items():
        lines.append(f"shape {shape} ({figures['queries_scored']} queries):")
        for mode, s in figures["modes"].items():
            lines.append(
                f"  {mode:<8} R@5 {s['recall@5']:.4f} MRR@10 {s['mrr@10']:.4f} "
                f"nDCG@10 {s['ndcg@10']:.4f}"
            )
    for cutoff, s in report.get("cutoff_sweep", {}).items():
        lines.append(
            f"  hybrid at cutoff {cutoff}: R@5 {s['recall@5']:.4f} MRR@10 {s['mrr@10']:.4f} "
            f"nDCG@10 {s['ndcg@10']:.4f}"
        )
    return "\n".join(lines)
