"""The shipped confidence models, one per embedding provider (`model_for`).

MiniLM's was fit by `bench/confidence_fit.py` (the command and figures: docs/EVAL.md,
"Answers that say when memory knows nothing"). Titan cannot be measured from this
project's machines: its default is MiniLM's fit made conservative (see TITAN_DEFAULT),
and docs/OPERATIONS.md gives the procedure that fits it in an account.
"""

from __future__ import annotations

from grandbo.embedding.base import EmbeddingProvider
from grandbo.memory.confidence.model import ConfidenceModel

# `python -m bench.confidence_fit` on the fit halves of cloud_postmortems/symptom and
# gitbugs_hadoop/duplicate (3,897 candidates of 97 queries, 48 relevant), L2 1.0. The floor
# is the lowest of the fit halves' curve that serves at most two hits on average to the
# post-mortem queries memory cannot answer (1.73 there, 2.12 on GitBugs). Hits stay in the
# fused order: ranked by this confidence instead, the answerable queries' MRR@10 fell
# (post-mortems .772 -> .717 on the fit half, GitBugs .667 -> .556 on the measure half),
# so the model estimates and withholds, and the fusion orders (docs/EVAL.md).
MINILM = ConfidenceModel(
    name="minilm-v1",
    fit_on="the fit half (by query-id hash) of cloud_postmortems/symptom and "
    "gitbugs_hadoop/duplicate, half of the queries with their answer removed",
    intercept=-6.1541,
    weights={
        "closeness": 0.8650,
        "lexical_reach": 0.6608,
        "tag_share": -0.3308,
        "lexical_rr": 2.3196,
        "vector_rr": 0.5743,
        "both_legs": 1.2465,
        "gap": 0.8859,
        "recurrences": 0.5614,
        "closeness_over_median": 0.4827,
        "reach_over_median": 0.8959,
        "closeness_lead": 0.7934,
        "reach_lead": 1.4693,
        "closest": 0.2503,
        "best_reach": 0.7442,
    },
    default_floor=0.03,
    ranks=False,
)

# Titan's distances are not MiniLM's and were never measured here: the same fit with the
# vector-distance terms halved (closeness is relative to the cutoff, but how far apart
# related texts sit is the model's own), served in fused order, and a floor a third of
# MiniLM's, so that an uncalibrated stage withholds only what is far below any precedent.
# docs/OPERATIONS.md, "Fitting the confidence model for Titan", replaces it from measurement.
_DISTANCE_TERMS = {"closeness", "closeness_over_median", "closeness_lead", "closest"}
TITAN_DEFAULT = ConfidenceModel(
    name="titan-default-v1",
    fit_on="not fit: MiniLM's fit with its distance terms halved (a conservative default)",
    intercept=MINILM.intercept,
    weights={
        name: weight / 2 if name in _DISTANCE_TERMS else weight
        for name, weight in MINILM.weights.items()
    },
    default_floor=0.01,
    ranks=False,
)

# The test double's vectors mean nothing beyond shared words: it is served as before
# confidence existed (fused order, nothing withheld), with MiniLM's coefficients
UNCALIBRATED = ConfidenceModel(
    name="uncalibrated",
    fit_on="none: a provider without a fit (served in fused order, nothing withheld)",
    intercept=MINILM.intercept,
    weights=MINILM.weights,
    default_floor=0.0,
    ranks=False,
)


def model_for(provider: EmbeddingProvider) -> ConfidenceModel:
    """The model fit for `provider`'s vectors."""
    if provider.model_id.startswith("all-MiniLM-L6-v2"):
        return MINILM
    if provider.model_id.startswith("amazon.titan-embed"):
        return TITAN_DEFAULT
    return UNCALIBRATED
