"""A confidence model fitted from the organization's own lake, for whatever model embeds it
(issue 50, point 3).

The shipped confidence model was fit and measured on labelled questions for MiniLM only;
Titan's default (`titan-default-v1`) is MiniLM's fit made conservative, never measured. This
job measures instead, on the organization's own data and model, with no labels:

1. **Questions from the lake** (`grandbo.memory.domain.lake_questions`): a sample of the
   active entries with a current vector each give up to three questions in the shapes an
   investigator's agent sends (the title as a sentence, a sentence of the summary, that
   sentence shortened). Half of the entries, by hash, are left out of memory for their
   own questions: the search is scored as if memory did not hold the entry (the right
   answer is "nothing close"); for the others the entry is the right answer.
2. **Searched as Beacon is answered**: `MemoryService.rank`, both legs, the fusion, the
   signals the query path scores (`signals_of`); only complete searches (the meaning leg
   ran over every entry) are kept.
3. **Fit where the embedding model matters, anchored where it does not**: the terms of
   the vector leg (`DISTANCE_SIGNALS`: closeness and its relatives, the vector rank, both
   legs agreeing) are fit on the `fit` half of the entries (plain Python, `fit_plain`: the
   index job's layer holds no numpy), each bounded to +-WEIGHT_BOUND; the lexical terms are
   the supervised fit's (BM25, tags and the question's shape mean the same whatever
   embeds); and the level is anchored to the keyword model's (`_anchored`), because a
   question made from an entry's own words is easier than one an investigator writes: fit
   on such questions alone, every term and the level (tried first, on MiniLM), the model
   rated real questions far too low (recall@5 served .10 on post-mortem summaries) though
   it separated its own questions at .97. The floor is the lowest that serves at most 2
   hits on average where the entry was left out (fit half); hits are served by
   confidence where that orders the fit half's right answers at least as well as the
   fusion. The `measure` half gives the figures (AUROC of the top confidence, right first
   against "nothing close"; the top hit's calibration; hits where nothing is close;
   recall@5 served), beside the shipped model's on the same questions.
4. **Kept within bounds**: stored per organization and embedding revision only when the
   lake had at least MIN_ENTRIES embedded entries and the measure half's AUROC reached
   MIN_AUROC; otherwise the report says why and the shipped model keeps serving.

Served (`Recall.confidence_model`) wherever the shipped model was not measured on the
embedding model (Titan, the test double); on MiniLM the shipped, supervised fit serves and
this job's figures are the comparison (`grandbo eval --self-fit`). Run by `grandbo
calibrate` locally and by the hourly index job in AWS (an organization without a fit of
the revision it is served from, after a re-embed, or with one older than REFIT_AFTER_S).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from grandbo.errors import GrandboError, InvalidInputError
from grandbo.memory.domain.lake_questions import LakeQuestion, questions_of
from grandbo.memory.domain.logistic import fit_plain, sigmoid
from grandbo.memory.domain.measures import auroc, calibration_error
from grandbo.memory.read.confidence.fitted import KEYWORDS, MINILM, model_for
from grandbo.memory.read.confidence.model import ConfidenceModel
from grandbo.memory.read.confidence.serving import reaches
from grandbo.memory.read.confidence.signals import FEATURES, signals_of
from grandbo.memory.read.recall import fuse
from grandbo.memory.repository import SearchLegs
from grandbo.memory.service import MemoryService
from grandbo.tenancy import require_tenant

_log = logging.getLogger(__name__)

# below this many active entries with a current vector, no fit: the shipped model serves
# (titan-default-v1 on Titan); 60 entries give about 90 questions to each half
MIN_ENTRIES = 60
DEFAULT_SAMPLE = 300
MAX_SAMPLE = 2_000
# a fit that separates "right first" from "nothing close" worse than this on the questions
# it was not fit on is not kept
MIN_AUROC = 0.70
WEIGHT_BOUND = 8.0
L2 = 1.0
FLOORS = (0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1)
MAX_UNANSWERABLE_HITS = 2.0
SERVED = 5
# the hourly job refits an organization whose fit is older than this (its lake grew)
REFIT_AFTER_S = 7 * 24 * 3600.0
# the signals of the model: the supervised fit's (recurrences and the fused place left out)
SIGNALS = tuple(name for name in FEATURES if name in MINILM.weights)
# where the lexical terms come from: the fit on labelled questions
LEXICAL_FROM = MINILM
# what depends on the embedding model, fit on the lake: every term of the vector leg
DISTANCE_SIGNALS = (
    "closeness",
    "vector_rr",
    "both_legs",
    "closeness_over_median",
    "closeness_lead",
    "closest",
    "closeness_by_size",
)


@dataclass(frozen=True, slots=True)
class _Question:
    """One question's candidates in the fused order: their signals (`SIGNALS`), whether
    each is the right answer, and the shipped model's confidence in each."""

    question: LakeQuestion
    rows: list[list[float]]
    labels: list[int]
    shipped: list[float]


@dataclass(frozen=True, slots=True)
class Figures:
    """What a model serves the measure half's questions."""

    questions: int
    auroc: float | None
    calibration: float | None
    unanswerable_hits: float | None
    recall_served: float | None
    recall_fused: float | None

    def as_dict(self) -> dict[str, Any]:
        return {k: None if v is None else round(v, 4) for k, v in dataclasses.asdict(self).items()}


@dataclass
class ConfidenceFitReport:
    tenant_id: str
    embed_rev: str
    embedded_entries: int
    questions: int = 0
    kept: bool = False
    serves: bool = False
    reason: str = ""
    model: dict[str, Any] | None = None
    fitted: Figures | None = None
    shipped_name: str = ""
    shipped: Figures | None = None
    skipped: int = 0
    by_shape: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("fitted", "shipped")}
        out["fitted"] = None if self.fitted is None else self.fitted.as_dict()
        out["shipped"] = None if self.shipped is None else self.shipped.as_dict()
        return out


def fit_confidence(
    service: MemoryService,
    tenant_id: str,
    *,
    sample: int = DEFAULT_SAMPLE,
    store: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> ConfidenceFitReport:
    """Fit the organization's confidence model from its lake, measure it beside the shipped
    model, and keep it when it is within bounds (`store`)."""
    tenant = require_tenant(tenant_id)
    if isinstance(sample, bool) or not isinstance(sample, int):
        raise InvalidInputError("sample", "must be an integer")
    if not MIN_ENTRIES <= sample <= MAX_SAMPLE:
        raise InvalidInputError("sample", f"must be between {MIN_ENTRIES} and {MAX_SAMPLE}")
    provider = service.serving_provider(tenant)
    embedded, sources = service.repository.lake_question_sources(tenant, provider.embed_rev, sample)
    shipped = model_for(provider)
    report = ConfidenceFitReport(tenant, provider.embed_rev, embedded, shipped_name=shipped.name)
    if embedded < MIN_ENTRIES:
        report.reason = (
            f"{embedded} active entries have a vector of {provider.embed_rev}; a fit needs "
            f"{MIN_ENTRIES}: {shipped.name} serves until then"
        )
        return report
    asked = [
        q for entry_id, title, summary in sources for q in questions_of(entry_id, title, summary)
    ]
    searched: list[_Question] = []
    for done, question in enumerate(asked, start=1):
        found = _search(service, tenant, question, shipped)
        if found is None:
            report.skipped += 1
        else:
            searched.append(found)
            report.by_shape[question.shape] = report.by_shape.get(question.shape, 0) + 1
        if progress is not None:
            progress(done, len(asked))
    report.questions = len(searched)
    fit_on = [q for q in searched if q.question.half == "fit"]
    measure_on = [q for q in searched if q.question.half == "measure"]
    labels = [y for q in fit_on for y in q.labels]
    if sum(labels) < 10 or not measure_on:
        report.reason = (
            f"too few questions found their own entry ({sum(labels)} of {len(fit_on)} in "
            f"the fit half): not kept"
        )
        return _not_kept(service, report, shipped, store)
    # measured: fit on the fit half, its figures on the measure half beside the shipped
    # model's on the same questions
    held_out = _model(fit_on, provider.embed_rev, len(searched), len(sources))
    report.fitted = _figures(measure_on, _confidences(measure_on, held_out), held_out)
    report.shipped = _figures(measure_on, [q.shipped for q in measure_on], shipped)
    # served: fit on every question (twice the questions; the fit on half of a 260-entry
    # lake varied by up to .05 in AUROC on the development sets, docs/EVAL.md)
    model = _model(searched, provider.embed_rev, len(searched), len(sources))
    report.model = model.as_dict()
    if report.fitted.auroc is None or report.fitted.auroc < MIN_AUROC:
        report.reason = (
            f"the fit separates right answers from 'nothing close' at AUROC "
            f"{report.fitted.auroc} on the questions it was not fit on (at least "
            f"{MIN_AUROC} is needed): not kept"
        )
        return _not_kept(service, report, shipped, store)
    report.kept = store
    report.serves = store and not shipped.measured
    report.reason = (
        f"kept; it serves this organization's answers in place of {shipped.name}"
        if report.serves
        else f"kept; {shipped.name} serves (it was measured on labelled questions of this "
        "embedding model)"
        if store
        else "measured only (not kept)"
    )
    if store:
        details = {
            "fitted": report.fitted.as_dict(),
            "shipped": {"name": shipped.name, **report.shipped.as_dict()},
            "entries": len(sources),
            "by_shape": report.by_shape,
        }
        service.repository.store_confidence_fit(
            tenant, provider.embed_rev, report.model, len(searched), details
        )
        service.forget_query_settings(tenant)
    return report


def _not_kept(
    service: MemoryService, report: ConfidenceFitReport, shipped: ConfidenceModel, store: bool
) -> ConfidenceFitReport:
    """A fit measured and not kept: recorded (`store`), so the hourly job does not measure
    the organization again at every run ahead of the others; the model serving stays (a
    fit kept before, else the shipped one)."""
    if store:
        service.repository.record_confidence_attempt(
            report.tenant_id,
            report.embed_rev,
            report.questions,
            {"reason": report.reason, "at": datetime.now(UTC).isoformat()},
        )
        service.forget_query_settings(report.tenant_id)
    serving = service.confidence_model(service.serving_provider(report.tenant_id), report.tenant_id)
    report.reason += f"; {serving.name} serves"
    return report


def _model(
    questions: Sequence[_Question], embed_rev: str, asked: int, entries: int
) -> ConfidenceModel:
    """The model fit on `questions`: its terms (`fit_distance_terms`), its floor, and
    whether it orders hits (where ordering by it finds the right answers at least as
    early as the fusion)."""
    intercept, weights = fit_distance_terms(questions)
    confidences = _confidences(questions, ConfidenceModel("", "", intercept, weights, 0.0))
    ranks = _mrr(questions, confidences, by_confidence=True) >= _mrr(
        questions, confidences, by_confidence=False
    )
    fitted_at = datetime.now(UTC)
    return ConfidenceModel(
        name=f"lake-fit-{fitted_at:%Y%m%dT%H%M%S}",
        fit_on=f"{asked} questions made from {entries} of the organization's entries "
        f"({embed_rev}), half left out of memory for 'nothing close', fitted "
        f"{fitted_at:%Y-%m-%d %H:%M} UTC",
        intercept=round(intercept, 4),
        weights={k: round(v, 4) for k, v in weights.items()},
        default_floor=_floor(questions, confidences),
        ranks=ranks,
        measured=True,
    )


def fit_due(
    service: MemoryService,
    *,
    time_left_s: Callable[[], float],
    per_fit_s: float = 120.0,
) -> dict[str, str]:
    """The hourly job's part (AWS): every organization with no fit of the revision it is
    served from (a new one, or one re-embedded since) or one older than REFIT_AFTER_S is
    fitted, while `time_left_s` leaves room for another; what each got, by organization."""
    tenants = service.repository.tenant_ids()
    revisions = {t: service.serving_provider(t).embed_rev for t in tenants}
    outcome: dict[str, str] = {}
    for tenant in service.repository.confidence_fits_due(revisions, REFIT_AFTER_S):
        if time_left_s() < per_fit_s:
            outcome[tenant] = "not reached: the next run fits it"
            continue
        try:
            outcome[tenant] = fit_confidence(service, tenant).reason
        except GrandboError as exc:  # one organization's failure never stops the others
            _log.warning("fitting %s's confidence failed: %s", tenant, exc)
            outcome[tenant] = f"failed: {exc}"
    return outcome


def fit_distance_terms(questions: Sequence[_Question]) -> tuple[float, dict[str, float]]:
    """The model's intercept and weights: the lexical terms the supervised fit's
    (`LEXICAL_FROM`: BM25, tags and the question's shape mean the same whatever embeds), the
    distance terms fit on the lake's questions (each bounded to +-WEIGHT_BOUND), and the
    level anchored (`_anchored`)."""
    rows = [row for q in questions for row in q.rows]
    labels = [y for q in questions for y in q.labels]
    free = [SIGNALS.index(name) for name in DISTANCE_SIGNALS]
    offsets = [
        sum(LEXICAL_FROM.weights[name] * row[i] for i, name in enumerate(SIGNALS) if i not in free)
        for row in rows
    ]
    intercept, fitted = fit_plain(
        [[row[i] for i in free] for row in rows], labels, l2=L2, offsets=offsets
    )
    weights = {name: LEXICAL_FROM.weights[name] for name in SIGNALS}
    for name, weight in zip(DISTANCE_SIGNALS, fitted, strict=True):
        weights[name] = max(-WEIGHT_BOUND, min(WEIGHT_BOUND, weight))
    return _anchored(questions, intercept, weights), weights


def _anchored(questions: Sequence[_Question], intercept: float, weights: dict[str, float]) -> float:
    """The intercept at which the model's mean confidence over every candidate of the lake's
    questions is the keyword model's (`KEYWORDS`: fit and measured on labelled questions,
    with no distance term, so its level means the same on any embedding model). A question
    made from an entry's own words is easier than one an investigator writes: fit on them
    alone, the level is the lake's (measured on MiniLM: every real question rated too low);
    the separation the distance terms learn carries over, the level is anchored."""
    scored = [(row, place) for q in questions for place, row in enumerate(q.rows)]
    target = statistics.fmean(_keyword_p(row, place) for row, place in scored)
    lo, hi = intercept - 40.0, intercept + 40.0
    for _ in range(60):
        mid = (lo + hi) / 2
        mean = statistics.fmean(
            sigmoid(mid + sum(weights[n] * v for n, v in zip(SIGNALS, row, strict=True)))
            for row, _ in scored
        )
        lo, hi = (mid, hi) if mean < target else (lo, mid)
    return (lo + hi) / 2


def _keyword_p(row: Sequence[float], place: int) -> float:
    """The keyword model's confidence in a candidate, from its signals and fused place."""
    values = dict(zip(SIGNALS, row, strict=True))
    values["fused_place"] = math.log(place + 1)
    return sigmoid(
        KEYWORDS.intercept + sum(w * values.get(name, 0.0) for name, w in KEYWORDS.weights.items())
    )


def _without(legs: SearchLegs, left_out: UUID) -> SearchLegs:
    """The legs as if memory did not hold `left_out`."""
    return dataclasses.replace(
        legs,
        lexical=[c for c in legs.lexical if c.entry_id != left_out],
        vector=[c for c in legs.vector if c.entry_id != left_out],
        distances={k: v for k, v in legs.distances.items() if k != left_out},
        lexical_scores={k: v for k, v in legs.lexical_scores.items() if k != left_out},
        shared_tags={k: v for k, v in legs.shared_tags.items() if k != left_out},
    )


def _search(
    service: MemoryService, tenant: str, question: LakeQuestion, shipped: ConfidenceModel
) -> _Question | None:
    """The question searched as Beacon's is; None where the search was not complete."""
    try:
        ranked = service.rank(tenant, question.text)
    except GrandboError:
        return None
    legs = ranked.legs
    if ranked.vector_error is not None or legs.active_without_current_vector:
        return None
    if question.left_out:
        legs = _without(legs, question.source)
    order = [f.key for f in fuse(legs)]
    if not order:
        return None
    signals = signals_of(order, legs, ranked.topic_tags, ranked.vector_cutoff)
    full = [signals[i].vector() for i in order]
    columns = [FEATURES.index(name) for name in SIGNALS]
    return _Question(
        question=question,
        rows=[[x[c] for c in columns] for x in full],
        labels=[int(not question.left_out and i == question.source) for i in order],
        shipped=[shipped.probability(signals[i]) for i in order],
    )


def _confidences(questions: Sequence[_Question], model: ConfidenceModel) -> list[list[float]]:
    """`model`'s confidence in each candidate of each question (its signals: `SIGNALS`),
    computed once for every measure that reads them."""
    return [
        [
            sigmoid(
                model.intercept
                + sum(model.weights[name] * v for name, v in zip(SIGNALS, row, strict=True))
            )
            for row in q.rows
        ]
        for q in questions
    ]


def _order(confidence: Sequence[float]) -> list[int]:
    """The candidates' places, best first by confidence, ties in the fused order (as
    `ConfidenceModel.order` serves them)."""
    return sorted(range(len(confidence)), key=lambda i: (-round(confidence[i], 12), i))


def _served(confidence: Sequence[float], floor: float, ranks: bool) -> list[int]:
    """The candidates served (their places in the fused order), at most SERVED."""
    places = _order(confidence) if ranks else range(len(confidence))
    return [i for i in places if reaches(confidence[i], floor)][:SERVED]


def _floor(questions: Sequence[_Question], confidences: Sequence[Sequence[float]]) -> float:
    """The lowest floor that serves at most MAX_UNANSWERABLE_HITS on average where the
    question's entry was left out."""
    left_out = [c for q, c in zip(questions, confidences, strict=True) if q.question.left_out]
    for floor in FLOORS:
        hits = [len(_served(c, floor, True)) for c in left_out]
        if not hits or statistics.fmean(hits) <= MAX_UNANSWERABLE_HITS:
            return floor
    return FLOORS[-1]


def _mrr(
    questions: Sequence[_Question],
    confidences: Sequence[Sequence[float]],
    *,
    by_confidence: bool,
) -> float:
    ranks = []
    for q, confidence in zip(questions, confidences, strict=True):
        if q.question.left_out:
            continue
        order = _order(confidence) if by_confidence else range(len(confidence))
        ranks.append(next((1 / n for n, i in enumerate(order, start=1) if q.labels[i]), 0.0))
    return statistics.fmean(ranks) if ranks else 0.0


def _figures(
    questions: Sequence[_Question],
    confidences: Sequence[Sequence[float]],
    model: ConfidenceModel,
) -> Figures:
    """What `model` (its `confidences` in each question's candidates, its floor and order)
    serves `questions`."""
    floor, ranks = model.default_floor, model.ranks
    right_first, nothing_close, tops, hits, served, fused = [], [], [], [], [], []
    for q, confidence in zip(questions, confidences, strict=True):
        top = _order(confidence)[0] if ranks else 0
        tops.append((confidence[top], q.labels[top]))
        if q.question.left_out:
            nothing_close.append(confidence[top])
            hits.append(len(_served(confidence, floor, ranks)))
        else:
            if q.labels[top]:
                right_first.append(confidence[top])
            served.append(float(any(q.labels[i] for i in _served(confidence, floor, ranks))))
            fused.append(float(any(q.labels[:SERVED])))
    return Figures(
        questions=len(questions),
        auroc=auroc(right_first, nothing_close),
        calibration=calibration_error([c for c, _ in tops], [o for _, o in tops]),
        unanswerable_hits=statistics.fmean(hits) if hits else None,
        recall_served=statistics.fmean(served) if served else None,
        recall_fused=statistics.fmean(fused) if fused else None,
    )
