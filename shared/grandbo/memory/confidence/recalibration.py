"""An organization's own verdicts recalibrate the confidence model (Platt scaling).

A verdict may carry the confidence its hit was served with (`Feedback.confidence`). Once
an organization has MIN_VERDICTS of them, at least MIN_EACH helpful and MIN_EACH not
(not_helpful or misleading), a two-parameter logistic fit maps the model's confidence to
its own outcomes:

    confidence' = sigmoid(scale * logit(confidence) + shift)

fit by Newton's method with a pull towards the identity (scale 1, shift 0: PRIOR_WEIGHT
pseudo-observations' worth), bounded (SCALE_BOUNDS, SHIFT_BOUNDS) so that a few odd
verdicts never turn the model upside down. Refit after every such verdict (the last
MAX_VERDICTS), kept in the organization's settings and read with its floor. Plain Python:
the query and write Lambdas import no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from grandbo.memory.confidence.logistic import sigmoid

MIN_VERDICTS = 30
MIN_EACH = 5
MAX_VERDICTS = 500
PRIOR_WEIGHT = 5.0
SCALE_BOUNDS = (0.25, 4.0)
SHIFT_BOUNDS = (-4.0, 4.0)
_EDGE = 1e-6


@dataclass(frozen=True, slots=True)
class Recalibration:
    scale: float
    shift: float
    verdicts: int

    def apply(self, confidence: float) -> float:
        return sigmoid(self.scale * logit(confidence) + self.shift)


def logit(p: float) -> float:
    p = min(max(p, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


def enough(outcomes: Sequence[bool]) -> bool:
    helpful = sum(outcomes)
    return len(outcomes) >= MIN_VERDICTS and min(helpful, len(outcomes) - helpful) >= MIN_EACH


def fit(served: Sequence[tuple[float, bool]]) -> Recalibration | None:
    """The recalibration of these (served confidence, helpful) pairs, or None without
    enough of them."""
    if not enough([helpful for _, helpful in served]):
        return None
    xs = [logit(c) for c, _ in served]
    ys = [1.0 if helpful else 0.0 for _, helpful in served]
    a, b = 1.0, 0.0
    for _ in range(50):
        ga = PRIOR_WEIGHT * (a - 1.0)
        gb = PRIOR_WEIGHT * b
        haa, hab, hbb = PRIOR_WEIGHT, 0.0, PRIOR_WEIGHT
        for x, y in zip(xs, ys, strict=True):
            p = sigmoid(a * x + b)
            w = p * (1.0 - p)
            ga += (p - y) * x
            gb += p - y
            haa += w * x * x
            hab += w * x
            hbb += w
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        a, b = a - da, b - db
        if abs(da) < 1e-9 and abs(db) < 1e-9:
            break
    return Recalibration(
        scale=min(max(a, SCALE_BOUNDS[0]), SCALE_BOUNDS[1]),
        shift=min(max(b, SHIFT_BOUNDS[0]), SHIFT_BOUNDS[1]),
        verdicts=len(served),
    )
