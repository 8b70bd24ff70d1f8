"""`grandbo eval --no-answer`: does memory say when it knows nothing?

Half of the task's queries (by a hash of their id: `no_answer_half`) lose their relevant
documents: the corpus is written into a throwaway tenant without them, so for those
queries every hit is a false lead. Every query then runs through the real ranking
(`MemoryService.rank`, the confidence model, the floor, the collapse), and the report
gives, beside today's answer (the fused ranking, five hits, no floor) from the same run:

- on the queries memory cannot answer: the mean number of hits, the share answered with
  none;
- on the others: recall@5 and MRR@10;
- the AUROC of the top hit's confidence (the top hit relevant against memory not holding
  the answer; and against every top hit that is not relevant), and its calibration: the
  expected calibration error over ten equal-width bins, of the top hit and of every hit.

The model is fit on other queries than those it is measured on: `fit_half` splits the
queries by another bit of the same hash, the shipped coefficients were fit on the `fit`
half of the development sets (`grandbo.memory.confidence.model`), and the report gives
the figures on the `measure` half apart from all. `samples` (the features and labels of
every candidate) is what `bench/confidence_fit.py` fits a model from.
"""

from __future__ import annotations

import hashlib
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from grandbo.beir import load_corpus, load_qrels, load_queries
from grandbo.errors import InvalidInputError
from grandbo.evaluation import (
    ProgressFactory,
    add_documents,
    fused_without,
    load_into_tenant,
    only_as,
)
from grandbo.memory.confidence.model import ConfidenceModel
from grandbo.memory.confidence.serving import reaches
from grandbo.memory.confidence.signals import signals_of
from grandbo.memory.service import MemoryService
from grandbo.memory.topic import validate_topic

LIMIT = 5


def _digest(query_id: str) -> bytes:
    return hashlib.sha256(query_id.encode()).digest()


def no_answer_half(query_id: str) -> bool:
    """The queries whose relevant documents are removed from memory: half, by hash."""
    return _digest(query_id)[0] % 2 == 1


def fit_half(query_id: str) -> str:
    """`fit` or `measure`: which queries a model is fit on and which it is measured on."""
    return "fit" if _digest(query_id)[1] % 2 == 0 else "measure"


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    query_id: str
    answerable: bool
    half: str
    today: list[bool]  # today's five hits, relevant or not
    served: list[bool]  # the served hits (confidence order, floor applied)
    served_confidence: list[float]
    top_confidence: float | None  # the best candidate's, before the floor
    top_relevant: bool


@dataclass
class Samples:
    """Every candidate's features and label, with its query and half (for fitting)."""

    features: list[list[float]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    halves: list[str] = field(default_factory=list)
    # per query: how many relevant documents memory holds for it (0: unanswerable)
    relevant: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "features": self.features,
            "labels": self.labels,
            "queries": self.queries,
            "halves": self.halves,
            "relevant": self.relevant,
        }


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The probability that a positive scores above a negative (ties count half)."""
    if not positives or not negatives:
        return None
    wins = 0.0
    for p in positives:
        for n in negatives:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(positives) * len(negatives))


def calibration_error(confidences: Sequence[float], outcomes: Sequence[bool]) -> float | None:
    """Expected calibration error over ten equal-width bins of confidence."""
    if not confidences:
        return None
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(10)]
    for c, o in zip(confidences, outcomes, strict=True):
        bins[min(int(c * 10), 9)].append((c, o))
    total = len(confidences)
    return sum(
        len(b) / total * abs(statistics.fmean(c for c, _ in b) - statistics.fmean(o for _, o in b))
        for b in bins
        if b
    )


def _mrr(flags: Sequence[bool]) -> float:
    return next((1.0 / i for i, f in enumerate(flags[:10], start=1) if f), 0.0)


def _recall5(flags: Sequence[bool], relevant: int) -> float:
    return sum(flags[:5]) / relevant if relevant else 0.0


def run_no_answer_eval(
    service: MemoryService,
    folder: Path,
    task: str,
    *,
    model: ConfidenceModel | None = None,
    min_confidence: float | None = None,
    topic_words: int | None = None,
    progress: ProgressFactory | None = None,
) -> tuple[dict[str, Any], Samples]:
    """Load the corpus without the no-answer half's relevant documents, query, score.

    `topic_words` cuts every query to its first N words: the size of a topic Beacon sends
    (a post-mortem's impact paragraph is 56 words at the median, a topic about 12)."""
    wrap = progress or (lambda _description, _unit: lambda items, _total: items)
    model = model or service.confidence_model(service.provider)
    floor = model.default_floor if min_confidence is None else min_confidence
    malformed: list[str] = []
    corpus = load_corpus(folder, malformed)
    queries = load_queries(folder, task, malformed)
    qrels = load_qrels(folder, task, malformed)
    own_is_query = {q.query_id for q in queries} & {d["_id"] for d in corpus}
    removed: set[str] = set()
    for query in queries:
        if no_answer_half(query.query_id):
            removed |= set(qrels.get(query.query_id, {})) - {query.query_id}
    kept = [d for d in corpus if d["_id"] not in removed]
    tenant = f"eval-{uuid.uuid4().hex[:12]}"
    refused: list[str] = []
    doc_of_entry = load_into_tenant(
        service, tenant, wrap("loading", "doc")(kept, len(kept)), refused
    )
    service.embed_pending(tenant, progress=wrap("embedding", "batch"))
    docs_of_entry: dict[UUID, list[str]] = {}
    add_documents(service, tenant, doc_of_entry, docs_of_entry)
    loaded = set(doc_of_entry.values())

    outcomes: list[QueryOutcome] = []
    samples = Samples()
    skipped: list[str] = []
    for query in wrap("querying", "query")(queries, len(queries)):
        named = qrels.get(query.query_id, {})
        own = query.query_id if query.query_id in own_is_query else None
        relevant = {d for d in named if d != own and d in loaded}
        if not named.keys() - {own}:
            continue  # nothing is relevant to it in the data: not a question of this test
        text = query.text if topic_words is None else " ".join(query.text.split()[:topic_words])
        try:
            validate_topic(text)
            ranked = service.rank(tenant, text)
        except InvalidInputError as exc:
            skipped.append(f"{query.query_id}: {exc}")
            continue
        alone = only_as(own, ranked.fused, docs_of_entry)
        fused = fused_without(ranked.legs, alone) if alone else ranked.fused

        def is_relevant(entry_id: UUID, relevant: set[str] = relevant) -> bool:
            return bool(relevant & set(docs_of_entry[entry_id]))

        # the query's own document left out, the signals are computed as if memory did not
        # hold it (as the fusion is: `fused_without`)
        signals = signals_of(fused, ranked.legs, ranked.topic_tags, ranked.vector_cutoff)
        confidence = {i: model.probability(signals[i]) for i in fused}
        half = fit_half(query.query_id)
        samples.relevant[query.query_id] = len(relevant)
        for entry_id in fused:
            samples.features.append(signals[entry_id].vector())
            samples.labels.append(int(is_relevant(entry_id)))
            samples.queries.append(query.query_id)
            samples.halves.append(half)
        entries = ranked.legs.entries
        today = service.collapse(tenant, [entries[i] for i in fused], ranked.serving, LIMIT)
        order = model.order(fused, confidence) if model.ranks else fused
        # as `query_org_memory` serves: the floor first, then the limit
        served = service.collapse(
            tenant,
            [entries[i] for i in order if reaches(confidence[i], floor)],
            ranked.serving,
            LIMIT,
        )
        top = order[0] if order else None
        outcomes.append(
            QueryOutcome(
                query_id=query.query_id,
                answerable=bool(relevant),
                half=half,
                today=[any(is_relevant(e.entry_id) for e in lesson.entries) for lesson in today],
                served=[any(is_relevant(e.entry_id) for e in lesson.entries) for lesson in served],
                served_confidence=[confidence[lesson.entry.entry_id] for lesson in served],
                top_confidence=None if top is None else confidence[top],
                top_relevant=top is not None and is_relevant(top),
            )
        )
    held = relevant_held(qrels, loaded, own_is_query)
    report: dict[str, Any] = {
        "dataset": folder.name,
        "task": task,
        "provider": service.provider.embed_rev,
        "model": model.name,
        "fit_on": model.fit_on,
        "ranking": "confidence" if model.ranks else "fused score",
        "min_confidence": floor,
        "topic_words": topic_words,
        "documents": len(corpus),
        "documents_removed": len(removed),
        "documents_refused": len(refused),
        "queries_skipped": skipped,
        "halves": {
            "all": summarize(outcomes, held),
            "measure": summarize([o for o in outcomes if o.half == "measure"], held),
        },
        "tenant": tenant,
    }
    return report, samples


def relevant_held(
    qrels: dict[str, dict[str, int]], loaded: set[str], own_is_query: set[str]
) -> dict[str, int]:
    """How many relevant documents memory holds for each query (recall's denominator)."""
    return {
        q: sum(1 for d in named if d in loaded and not (d == q and q in own_is_query))
        for q, named in qrels.items()
    }


def summarize(outcomes: Sequence[QueryOutcome], relevant: dict[str, int]) -> dict[str, Any]:
    unanswerable = [o for o in outcomes if not o.answerable]
    answerable = [o for o in outcomes if o.answerable]

    def mean(values: Sequence[float]) -> float | None:
        return round(statistics.fmean(values), 4) if values else None

    tops = [o for o in outcomes if o.top_confidence is not None]
    right_first = [o.top_confidence for o in tops if o.answerable and o.top_relevant]
    unheld = [o.top_confidence for o in tops if not o.answerable]
    wrong_first = [o.top_confidence for o in tops if not o.top_relevant]
    every_hit = [
        (c, f) for o in outcomes for c, f in zip(o.served_confidence, o.served, strict=True)
    ]
    return {
        "queries": len(outcomes),
        "unanswerable": len(unanswerable),
        "answerable": len(answerable),
        "unanswerable_mean_hits": {
            "today": mean([len(o.today) for o in unanswerable]),
            "now": mean([len(o.served) for o in unanswerable]),
        },
        "unanswerable_share_empty": {
            "today": mean([float(not o.today) for o in unanswerable]),
            "now": mean([float(not o.served) for o in unanswerable]),
        },
        "answerable_mean_hits": {
            "today": mean([len(o.today) for o in answerable]),
            "now": mean([len(o.served) for o in answerable]),
        },
        "answerable_recall@5": {
            "today": mean([_recall5(o.today, relevant[o.query_id]) for o in answerable]),
            "now": mean([_recall5(o.served, relevant[o.query_id]) for o in answerable]),
        },
        "answerable_mrr@10": {
            "today": mean([_mrr(o.today) for o in answerable]),
            "now": mean([_mrr(o.served) for o in answerable]),
        },
        "top_auroc_right_first_vs_unanswerable": _round(
            auroc([c for c in right_first if c is not None], [c for c in unheld if c is not None])
        ),
        "top_auroc_relevant_vs_not": _round(
            auroc(
                [c for c in right_first if c is not None],
                [c for c in wrong_first if c is not None],
            )
        ),
        "top_calibration_error": _round(
            calibration_error(
                [o.top_confidence for o in tops if o.top_confidence is not None],
                [o.top_relevant for o in tops],
            )
        ),
        "hit_calibration_error": _round(
            calibration_error([c for c, _ in every_hit], [f for _, f in every_hit])
        ),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def format_no_answer(report: dict[str, Any]) -> str:
    """The report as the table docs/EVAL.md carries."""
    lines = [
        f"{report['dataset']} / {report['task']} --no-answer: {report['documents']} documents, "
        f"{report['documents_removed']} removed (the relevant documents of the no-answer "
        f"half); provider {report['provider']}",
        f"confidence model {report['model']} (fit on {report['fit_on']}); ranking by "
        f"{report['ranking']}; floor {report['min_confidence']}",
    ]
    for name, figures in report["halves"].items():
        label = (
            "all queries"
            if name == "all"
            else "the measure half (queries the shipped model was not fit on)"
        )
        lines.append(
            f"{label}: {figures['queries']} queries, {figures['unanswerable']} memory cannot "
            f"answer, {figures['answerable']} it can"
        )
        lines.append(f"  {'':<36} {'today':>8} {'now':>8}")
        for key, title in (
            ("unanswerable_mean_hits", "no-answer: mean hits"),
            ("unanswerable_share_empty", "no-answer: share answered with none"),
            ("answerable_mean_hits", "answerable: mean hits"),
            ("answerable_recall@5", "answerable: recall@5"),
            ("answerable_mrr@10", "answerable: MRR@10"),
        ):
            today, now = figures[key]["today"], figures[key]["now"]
            lines.append(f"  {title:<36} {_cell(today):>8} {_cell(now):>8}")
        lines.append(
            "  top hit's confidence: AUROC right-first vs no-answer "
            f"{_cell(figures['top_auroc_right_first_vs_unanswerable'])}, relevant vs not "
            f"{_cell(figures['top_auroc_relevant_vs_not'])}; calibration error (10 bins) top "
            f"{_cell(figures['top_calibration_error'])}, every hit "
            f"{_cell(figures['hit_calibration_error'])}"
        )
    if report["queries_skipped"]:
        lines.append(f"skipped by the topic contract: {len(report['queries_skipped'])}")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
