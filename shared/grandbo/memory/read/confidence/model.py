"""The confidence model: a logistic fit of a candidate's absolute signals to "relevant".

    confidence = 1 / (1 + exp(-(intercept + sum(weight[f] * signal[f]))))

`grandbo.memory.read.confidence.signals` says what each signal is. The coefficients are
versioned here, one model per embedding provider (distances differ between models), and
were fit by `bench/confidence_fit.py` on the `fit` half of the development sets' queries
(`grandbo eval --no-answer --samples`), half of them with their relevant documents
removed from memory; docs/EVAL.md gives the figures on the other half. An organization's
own verdicts recalibrate the result once it has enough of them
(`grandbo.memory.domain.recalibration`).

numpy only (the fit); scoring is plain Python, so a query pays nothing to import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from grandbo.memory.domain.logistic import sigmoid
from grandbo.memory.read.confidence.signals import FEATURES, Signals, signals_of
from grandbo.memory.repository import SearchLegs


@dataclass(frozen=True, slots=True)
class ConfidenceModel:
    """One provider's fit: its coefficients, what it was fit on, and the floor below which
    a hit is withheld unless a request or the organization's settings say otherwise."""

    name: str
    fit_on: str
    intercept: float
    weights: Mapping[str, float]
    default_floor: float
    ranks: bool = False  # order hits by confidence (only where measured to beat the fusion)
    # fit and measured on labelled questions of this embedding model's vectors: a model
    # that is not (titan-default, uncalibrated) gives way to one fitted from the
    # organization's own lake (`grandbo.memory.lifecycle.confidence_fit`)
    measured: bool = False

    def logit(self, signals: Signals) -> float:
        return self.intercept + sum(
            self.weights.get(name, 0.0) * value
            for name, value in zip(FEATURES, signals.vector(), strict=True)
        )

    def probability(self, signals: Signals) -> float:
        return sigmoid(self.logit(signals))

    def confidences(
        self, order: Sequence[UUID], legs: SearchLegs, topic_tags: Sequence[str], cutoff: float
    ) -> dict[UUID, float]:
        """Each candidate's confidence (`order`: the candidates, in the fused order)."""
        signals = signals_of(order, legs, topic_tags, cutoff)
        return {entry_id: self.probability(signals[entry_id]) for entry_id in order}

    def order(self, ids: Sequence[UUID], confidence: Mapping[UUID, float]) -> list[UUID]:
        """`ids` by confidence, best first; ties keep their order in `ids` (the fusion's)."""
        place = {entry_id: i for i, entry_id in enumerate(ids)}
        return sorted(ids, key=lambda i: (-round(confidence[i], 12), place[i]))

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "fit_on": self.fit_on,
            "intercept": self.intercept,
            "weights": dict(self.weights),
            "default_floor": self.default_floor,
            "ranks": self.ranks,
        }

    @classmethod
    def from_dict(cls, stored: Mapping[str, object]) -> ConfidenceModel:
        """A model as `as_dict` wrote it (a fitted model, kept in the store); measured,
        since it was fit and measured on the organization's own lake."""
        weights = stored["weights"]
        assert isinstance(weights, dict)
        return cls(
            name=str(stored["name"]),
            fit_on=str(stored["fit_on"]),
            intercept=float(stored["intercept"]),  # type: ignore[arg-type]
            weights={str(k): float(v) for k, v in weights.items()},
            default_floor=float(stored["default_floor"]),  # type: ignore[arg-type]
            ranks=bool(stored.get("ranks", False)),
            measured=True,
        )


def fit_logistic(
    features: Sequence[Sequence[float]],
    labels: Sequence[int],
    *,
    l2: float = 1.0,
    iterations: int = 50,
    names: Sequence[str] = FEATURES,
) -> tuple[float, dict[str, float]]:
    """Intercept and weights (of `names`: the columns of `features`) by Newton's method on
    the L2-penalized log-likelihood (the intercept unpenalized). numpy is imported here
    only: the fit is an offline step."""
    import numpy as np

    x = np.asarray(features, dtype=float)
    y = np.asarray(labels, dtype=float)
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        gradient = design.T @ (p - y) + penalty * beta
        hessian = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.max(np.abs(step))) < 1e-9:
            break
    return float(beta[0]), {name: float(b) for name, b in zip(names, beta[1:], strict=True)}
