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
half of the development sets (`grandbo.memory.read.confidence.model`), and the report gives
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

from grandbo.beir import OWN_SHAPE, Query, load_corpus, load_qrels, load_shapes
from grandbo.errors import InvalidInputError
from grandbo.evaluation import (
    ProgressFactory,
    add_documents,
    fuse_without,
    load_into_tenant,
    only_as,
)
from grandbo.memory.domain.fusion import FusedRank
from grandbo.memory.domain.measures import auroc, calibration_error
from grandbo.memory.domain.topic import validate_topic
from grandbo.memory.lifecycle.confidence_fit import fit_confidence
from grandbo.memory.read.confidence.model import ConfidenceModel
from grandbo.memory.read.confidence.regime import Searched, keyword_view
from grandbo.memory.read.confidence.serving import reaches
from grandbo.memory.read.confidence.signals import idf, signals_of
from grandbo.memory.read.recall import fuse
from grandbo.memory.repository import SearchLegs
from grandbo.memory.service import MemoryService
from grandbo.text.tags import tokenize

LIMIT = 5
# the entries a self-fit makes its questions from (`--self-fit`)
MAX_FIT_SAMPLE = 400


def _digest(query_id: str) -> bytes:
    return hashlib.sha256(query_id.encode()).digest()


def no_answer_half(query_id: str) -> bool:
    """The queries whose relevant documents are removed from memory: half, by hash."""
    return _digest(query_id)[0] % 2 == 1


def fit_half(query_id: str) -> str:
    """`fit` or `measure`: which queries a model is fit on and which it is measured on."""
    return "fit" if _digest(query_id)[1] % 2 == 0 else "measure"


# The regimes every deployment meets (`grandbo.memory.read.confidence.regime`), in the order the
# run meets them: entries loaded but not embedded yet, then embedded, then the topic's
# embedding missing its deadline
REGIMES = ("entries_unembedded", "complete", "topic_unembedded")


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
    no_precedent: bool = False  # the answer said "memory holds nothing close"


@dataclass
class Samples:
    """Every candidate's features and label, with its query and half (for fitting), the
    regime its features were computed in (`complete`: the provider's model's signals;
    `keywords`: the keyword view's), and a few raw signals beside them (`EXTRA`)."""

    features: list[list[float]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    halves: list[str] = field(default_factory=list)
    regimes: list[str] = field(default_factory=list)
    extra: list[list[float]] = field(default_factory=list)
    # the shape of the question each candidate answered (`grandbo.beir.load_shapes`)
    shapes: list[str] = field(default_factory=list)
    # per query: how many relevant documents memory holds for it (0: unanswerable)
    relevant: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "features": self.features,
            "labels": self.labels,
            "queries": self.queries,
            "halves": self.halves,
            "regimes": self.regimes,
            "shapes": self.shapes,
            "extra_names": list(EXTRA),
            "extra": self.extra,
            "relevant": self.relevant,
        }


# raw signals kept beside the features, for trying new ones offline
EXTRA = ("fused_score", "fused_rank", "idf_share", "title_share", "service_named")


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
    shapes: Path | None = None,
    self_fit: bool = False,
) -> tuple[dict[str, Any], Samples]:
    """Load the corpus without the no-answer half's relevant documents, query, score, in
    each regime (`REGIMES`): before the entries are embedded, once they are, and with the
    topic's embedding past its deadline. The samples are the complete regime's and the
    keyword-only regimes' candidates (the topic-unembedded run's).

    `topic_words` cuts every query to its first N words: the size of a topic Beacon sends
    (a post-mortem's impact paragraph is 56 words at the median, a topic about 12).
    `shapes`: a folder of the same queries in other shapes (`grandbo.beir.load_shapes`),
    each asked in every regime on the same load and reported beside the set's own
    (`report["shapes"]`). `self_fit`: once the entries are embedded, the confidence model
    is fitted from the loaded lake itself (`grandbo.memory.lifecycle.confidence_fit`, no
    labels) and scores the complete and topic-unembedded regimes (`report["self_fit"]`)."""
    wrap = progress or (lambda _description, _unit: lambda items, _total: items)
    model = model or service.confidence_model(service.provider)
    keywords = service.keyword_model(service.provider)
    floor = model.default_floor if min_confidence is None else min_confidence
    keyword_floor = keywords.default_floor if min_confidence is None else min_confidence
    malformed: list[str] = []
    corpus = load_corpus(folder, malformed)
    by_shape = load_shapes(folder, task, shapes, malformed)
    queries = by_shape[OWN_SHAPE]
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
    loaded = set(doc_of_entry.values())
    run = _Run(service, tenant, qrels, own_is_query, loaded, model, floor, keyword_floor)
    samples = Samples()
    skipped: list[str] = []
    outcomes: dict[str, dict[str, list[QueryOutcome]]] = {}
    fitted: dict[str, Any] | None = None
    for regime in REGIMES:
        if regime == "complete":
            service.embed_pending(tenant, progress=wrap("embedding", "batch"))
            if self_fit:
                fitted = fit_confidence(
                    service, tenant, sample=MAX_FIT_SAMPLE, store=False
                ).as_dict()
                if fitted["model"] is not None:
                    model = ConfidenceModel.from_dict(fitted["model"])
                    run.model = model
                    run.floor = model.default_floor if min_confidence is None else min_confidence
                    floor = run.floor
        docs_of_entry: dict[UUID, list[str]] = {}
        add_documents(service, tenant, doc_of_entry, docs_of_entry)
        deadline = service.topic_embed_timeout_s
        if regime == "topic_unembedded":  # the real deadline path, with no time to meet it
            service.topic_embed_timeout_s = 0.0
        asked = [(shape, q) for shape, shaped in by_shape.items() for q in shaped]
        outcomes[regime] = {shape: [] for shape in by_shape}
        try:
            for shape, query in wrap(f"querying ({regime})", "query")(asked, len(asked)):
                outcome = run.query(
                    query,
                    topic_words,
                    docs_of_entry,
                    samples if regime != "entries_unembedded" else None,
                    skipped if regime == "complete" else [],
                    shape,
                )
                if outcome is not None:
                    outcomes[regime][shape].append(outcome)
        finally:
            service.topic_embed_timeout_s = deadline
    held = relevant_held(qrels, loaded, own_is_query)

    def figures(shape: str) -> dict[str, Any]:
        complete = outcomes["complete"][shape]
        return {
            "halves": {
                "all": summarize(complete, held),
                "measure": summarize([o for o in complete if o.half == "measure"], held),
            },
            "degraded": {
                regime: {
                    "all": degraded_summary(outcomes[regime][shape], held),
                    "measure": degraded_summary(
                        [o for o in outcomes[regime][shape] if o.half == "measure"], held
                    ),
                }
                for regime in REGIMES
            },
        }

    own = figures(OWN_SHAPE)
    report: dict[str, Any] = {
        "dataset": folder.name,
        "task": task,
        "provider": service.provider.embed_rev,
        "model": model.name,
        "keyword_model": keywords.name,
        "fit_on": model.fit_on,
        "ranking": "confidence" if model.ranks else "fused score",
        "min_confidence": floor,
        "keyword_min_confidence": keyword_floor,
        "topic_words": topic_words,
        "documents": len(corpus),
        "documents_removed": len(removed),
        "documents_refused": len(refused),
        "queries_skipped": skipped,
        "halves": own["halves"],
        "degraded": own["degraded"],
        "tenant": tenant,
    }
    if fitted is not None:
        report["self_fit"] = fitted
    if len(by_shape) > 1:
        report["shapes"] = {shape: figures(shape) for shape in by_shape}
    return report, samples


@dataclass
class _Run:
    """One evaluation's tenant and labels: each query asked as `query_org_memory` serves."""

    service: MemoryService
    tenant: str
    qrels: dict[str, dict[str, int]]
    own_is_query: set[str]
    loaded: set[str]
    model: ConfidenceModel
    floor: float
    keyword_floor: float

    def query(
        self,
        query: Query,
        topic_words: int | None,
        docs_of_entry: dict[UUID, list[str]],
        samples: Samples | None,
        skipped: list[str],
        shape: str = OWN_SHAPE,
    ) -> QueryOutcome | None:
        service, tenant = self.service, self.tenant
        named = self.qrels.get(query.query_id, {})
        own = query.query_id if query.query_id in self.own_is_query else None
        relevant = {d for d in named if d != own and d in self.loaded}
        if not named.keys() - {own}:
            return None  # nothing is relevant to it in the data: not a question of this test
        text = query.text if topic_words is None else " ".join(query.text.split()[:topic_words])
        try:
            validate_topic(text)
            ranked = service.rank(tenant, text)
        except InvalidInputError as exc:
            skipped.append(f"{query.query_id} ({shape}): {exc}")
            return None
        alone = only_as(own, ranked.fused, docs_of_entry)
        legs = ranked.legs
        fused_ranks = fuse(legs) if not alone else fuse_without(legs, alone)
        fused = [f.key for f in fused_ranks]

        def is_relevant(entry_id: UUID, relevant: set[str] = relevant) -> bool:
            return bool(relevant & set(docs_of_entry[entry_id]))

        # the query's own document left out, the signals are computed as if memory did not
        # hold it (as the fusion is), and scored as the query path scores them
        # scored by the run's model (the service's, or one fitted from the lake itself)
        regime, confidence, by_keywords = service.scored(
            tenant,
            fused,
            legs,
            ranked.topic_tags,
            ranked.vector_cutoff,
            ranked.serving,
            topic_embedded=ranked.vector_error is None,
            model=self.model,
        )
        half = fit_half(query.query_id)
        if samples is not None:
            samples.relevant[query.query_id] = len(relevant)
            full = signals_of(fused, legs, ranked.topic_tags, ranked.vector_cutoff)
            blind = signals_of(fused, keyword_view(legs), ranked.topic_tags, ranked.vector_cutoff)
            extra = _extra(fused_ranks, legs, ranked.topic_tags)
            for entry_id in fused:
                keyword = entry_id in by_keywords
                samples.features.append((blind if keyword else full)[entry_id].vector())
                samples.labels.append(int(is_relevant(entry_id)))
                samples.queries.append(query.query_id)
                samples.halves.append(half)
                samples.regimes.append("keywords" if keyword else "complete")
                samples.shapes.append(shape)
                samples.extra.append(extra[entry_id])
        entries = legs.entries
        today = service.collapse(tenant, [entries[i] for i in fused], ranked.serving, LIMIT)
        order = self.model.order(fused, confidence) if self.model.ranks else fused
        # as `query_org_memory` serves: the floor first, then the limit
        served = service.collapse(
            tenant,
            [
                entries[i]
                for i in order
                if reaches(confidence[i], self.keyword_floor if i in by_keywords else self.floor)
            ],
            ranked.serving,
            LIMIT,
        )
        top = order[0] if order else None
        return QueryOutcome(
            query_id=query.query_id,
            answerable=bool(relevant),
            half=half,
            today=[any(is_relevant(e.entry_id) for e in lesson.entries) for lesson in today],
            served=[any(is_relevant(e.entry_id) for e in lesson.entries) for lesson in served],
            served_confidence=[confidence[lesson.entry.entry_id] for lesson in served],
            top_confidence=None if top is None else confidence[top],
            top_relevant=top is not None and is_relevant(top),
            no_precedent=not served and regime is Searched.COMPLETE,
        )


def _extra(
    fused: Sequence[FusedRank[UUID]], legs: SearchLegs, topic_tags: Sequence[str]
) -> dict[UUID, list[float]]:
    """`EXTRA` of each candidate."""
    topic = set(topic_tags)
    unseen = idf(0, max(legs.active_entries, 1))
    mass = sum(legs.tag_weights.get(t, unseen) for t in topic) or 1.0
    rows = {}
    for rank, f in enumerate(fused, start=1):
        entry = legs.entries[f.key]
        shared = legs.shared_tags.get(f.key, [])
        title = set(tokenize(entry.title))
        service_tags = set(tokenize(entry.service or ""))
        rows[f.key] = [
            f.score,
            float(rank),
            sum(legs.tag_weights.get(t, unseen) for t in shared) / mass,
            len(title & topic) / len(title) if title else 0.0,
            1.0 if service_tags and service_tags <= topic else 0.0,
        ]
    return rows


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


def degraded_summary(outcomes: Sequence[QueryOutcome], relevant: dict[str, int]) -> dict[str, Any]:
    """A regime's answers against what its search found: recall@5 served and found (the
    unfiltered five), the hits served where memory cannot answer, and how many answers
    said "no precedent" (or served nothing) while the unfiltered five held the answer."""
    answerable = [o for o in outcomes if o.answerable]
    unanswerable = [o for o in outcomes if not o.answerable]

    def mean(values: Sequence[float]) -> float | None:
        return round(statistics.fmean(values), 4) if values else None

    return {
        "queries": len(outcomes),
        "answerable": len(answerable),
        "answerable_recall@5": {
            "found": mean([_recall5(o.today, relevant[o.query_id]) for o in answerable]),
            "served": mean([_recall5(o.served, relevant[o.query_id]) for o in answerable]),
        },
        "unanswerable_mean_hits": {
            "found": mean([len(o.today) for o in unanswerable]),
            "served": mean([len(o.served) for o in unanswerable]),
        },
        "no_precedent": sum(o.no_precedent for o in outcomes),
        "no_precedent_while_found": sum(o.no_precedent and any(o.today) for o in outcomes),
        "empty_while_found": sum(not o.served and any(o.today) for o in outcomes),
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
    fit = report.get("self_fit")
    if fit is not None:  # the model was fitted from the loaded lake (--self-fit)
        lines.append(f"self-fit: {fit['questions']} questions from the lake; {fit['reason']}")
        if fit["fitted"] is not None and fit["shipped"] is not None:
            lines.append(
                f"  on its own held-out questions: AUROC {fit['fitted']['auroc']} "
                f"(shipped {fit['shipped_name']} {fit['shipped']['auroc']}), calibration "
                f"{fit['fitted']['calibration']} ({fit['shipped']['calibration']})"
            )
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
    for regime, halves in report.get("degraded", {}).items():
        for name, d in halves.items():
            lines.append(
                f"regime {regime} ({name}): {d['queries']} queries; answerable recall@5 "
                f"served {_cell(d['answerable_recall@5']['served'])} of found "
                f"{_cell(d['answerable_recall@5']['found'])}; no-answer hits served "
                f"{_cell(d['unanswerable_mean_hits']['served'])} of "
                f"{_cell(d['unanswerable_mean_hits']['found'])}; 'no precedent' said "
                f"{d['no_precedent']} times, {d['no_precedent_while_found']} while the "
                f"unfiltered five held the answer; served nothing while they held it: "
                f"{d['empty_while_found']}"
            )
    shapes = report.get("shapes", {})
    if shapes:
        lines.append(
            "every shape side by side, the measure half (all queries): no-answer mean hits; "
            "answerable recall@5 unfiltered -> served; AUROC right-first vs no-answer; "
            "calibration error of the top hit"
        )
    for shape, shaped in shapes.items():
        m, a = shaped["halves"]["measure"], shaped["halves"]["all"]

        def pair(key: str, sub: str | None = None, m: Any = m, a: Any = a) -> str:
            first, second = (m[key], a[key]) if sub is None else (m[key][sub], a[key][sub])
            return f"{_cell(first)} ({_cell(second)})"

        lines.append(
            f"  {shape:<10} hits {pair('unanswerable_mean_hits', 'now')}; recall@5 "
            f"{pair('answerable_recall@5', 'today')} -> {pair('answerable_recall@5', 'now')}; "
            f"AUROC {pair('top_auroc_right_first_vs_unanswerable')}; "
            f"calibration {pair('top_calibration_error')}"
        )
    if report["queries_skipped"]:
        lines.append(f"skipped by the topic contract: {len(report['queries_skipped'])}")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
