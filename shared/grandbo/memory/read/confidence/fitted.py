"""The shipped confidence models, one per embedding provider (`model_for`).

MiniLM's was fit by `bench/confidence_fit.py` (the command and figures: docs/EVAL.md,
"Answers that say when memory knows nothing"). Titan cannot be measured from this
project's machines: its default is MiniLM's fit made conservative (see TITAN_DEFAULT),
served until the organization's lake is large enough for a fit of its own
(`grandbo.memory.lifecycle.confidence_fit`, issue 50), which then replaces it.
"""

from __future__ import annotations

from grandbo.embedding.base import EmbeddingProvider
from grandbo.memory.read.confidence.model import ConfidenceModel

# `python -m bench.confidence_fit --drop fused_place --drop recurrences
# --rank-by-confidence` on the fit halves of cloud_postmortems/symptom and
# gitbugs_hadoop/duplicate, every question asked in the three shapes an investigator's
# agent sends (the set's own full text, one sentence, a terse search-box form:
# eval/shapes/), pooled (11,005 candidates, 140 relevant), L2 1.0 (issue
# 50). The signals of the question's own shape (its size, the words the lake never saw,
# the shared words' mass and count, the shares weighed by the size) let one model mean
# the same on every shape: minilm-v2, fit on the full texts alone, rated the README's
# detailed question's lesson 0.07 and its short form 0.55. Left out: the fused place
# (one-word matches at the top of a small lake) and recurrences (the eval's merges vary
# from run to run and made a lesson seen three times look a sixth as likely). Hits are
# served by this confidence: on the measure halves MRR@10 moved +.02 / +.01 / -.01
# (post-mortems full / sentence / terse) and GitBugs' by at most .02 against the fused
# order, so an answer's order is the one its confidences state. The floor: the lowest of
# the fit curve that serves at most 2 hits on average to every shape's post-mortem
# questions memory cannot answer (0.025: 1.82 / 1.82 / 1.73; 0.02 serves 2.10 / 2.10 /
# 2.08). docs/EVAL.md, issue 50.
MINILM = ConfidenceModel(
    name="minilm-v3",
    fit_on="the fit half (by query-id hash) of cloud_postmortems/symptom and "
    "gitbugs_hadoop/duplicate in three shapes (full, sentence, terse), half of the "
    "queries with their answer removed",
    intercept=-6.4899,
    weights={
        "closeness": 0.1382,
        "lexical_reach": -0.2081,
        "tag_share": -0.6728,
        "lexical_rr": 1.7321,
        "vector_rr": -0.0259,
        "both_legs": 0.8428,
        "gap": 0.863,
        "closeness_over_median": 0.3721,
        "reach_over_median": -0.0616,
        "closeness_lead": 1.3695,
        "reach_lead": 1.4952,
        "closest": 0.2882,
        "best_reach": 0.3458,
        "rare_share": 0.7178,
        "title_share": 1.2713,
        "topic_size": 0.2884,
        "topic_unseen": 0.1737,
        "shared_mass": 1.8614,
        "shared_count": -1.6753,
        "closeness_by_size": 0.2016,
        "reach_by_size": 0.2162,
        "share_by_size": 1.5255,
    },
    default_floor=0.025,
    ranks=True,
    measured=True,
)

# Titan's distances are not MiniLM's and were never measured here: the same fit with the
# vector-distance terms halved (closeness is relative to the cutoff, but how far apart
# related texts sit is the model's own), served in fused order, and a floor a third of
# MiniLM's, so that an uncalibrated stage withholds only what is far below any precedent.
# docs/OPERATIONS.md, "Fitting the confidence model for Titan", replaces it from measurement.
_DISTANCE_TERMS = {
    "closeness",
    "closeness_over_median",
    "closeness_lead",
    "closest",
    "closeness_by_size",
}
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


# The keyword leg alone (the topic not embedded in time, entries without a current
# vector): `python -m bench.confidence_fit --regime keywords --drop recurrences
# --rank-by-confidence` on the same fit halves and shapes, every question asked with the
# vector leg off (7,192 candidates, 138 relevant), on the signals the keyword leg alone has
# (`KEYWORD_FEATURES`). It holds no distance term, so it serves every provider. Its floor
# leans to serving, since such an answer says it is keyword matches only: 0.025 serves
# 2.2-2.8 hits where memory cannot answer and keeps recall@5 within .04-.06 of what the
# keyword leg found on the post-mortem measure halves (docs/EVAL.md).
KEYWORDS = ConfidenceModel(
    name="keywords-v2",
    fit_on="the fit half of cloud_postmortems/symptom and gitbugs_hadoop/duplicate in "
    "three shapes, asked with the vector leg off, half of the queries with their answer "
    "removed",
    intercept=-4.0146,
    weights={
        "lexical_reach": -0.3218,
        "tag_share": -0.5771,
        "lexical_rr": -0.0708,
        "gap": 1.6699,
        "reach_over_median": 0.2561,
        "reach_lead": 1.1756,
        "best_reach": 0.2361,
        "rare_share": 0.6019,
        "title_share": 1.3753,
        "fused_place": -1.2259,
        "topic_size": 0.7675,
        "topic_unseen": 0.1506,
        "shared_mass": 1.3089,
        "shared_count": -1.8112,
        "reach_by_size": 0.2747,
        "share_by_size": 1.5852,
    },
    default_floor=0.025,
    ranks=True,
    measured=True,
)

# The test double's keyword model: as UNCALIBRATED, nothing withheld
UNCALIBRATED_KEYWORDS = ConfidenceModel(
    name="uncalibrated-keywords",
    fit_on="none: a provider without a fit (served in fused order, nothing withheld)",
    intercept=KEYWORDS.intercept,
    weights=KEYWORDS.weights,
    default_floor=0.0,
    ranks=False,
)


def keyword_model_for(provider: EmbeddingProvider, *, lake_fitted: bool = False) -> ConfidenceModel:
    """The model that scores what the keyword leg alone found, for `provider`'s answers
    (`lake_fitted`: the organization's own fit serves the provider's vectors, so the
    keyword model, which holds no distance term, is the measured one on every provider)."""
    if model_for(provider) is UNCALIBRATED and not lake_fitted:
        return UNCALIBRATED_KEYWORDS
    return KEYWORDS


def model_for(provider: EmbeddingProvider) -> ConfidenceModel:
    """The model fit for `provider`'s vectors."""
    if provider.model_id.startswith("all-MiniLM-L6-v2"):
        return MINILM
    if provider.model_id.startswith("amazon.titan-embed"):
        return TITAN_DEFAULT
    return UNCALIBRATED
