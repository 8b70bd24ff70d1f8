"""An organization's own verdicts recalibrate the confidence model (Platt scaling).

A verdict may carry the confidence its hit was served with (`Feedback.confidence`). Once
an organization has MIN_VERDICTS of them, at least MIN_EACH helpful and MIN_EACH not
(not_helpful or misleading), a two-parameter logistic fit maps the model's confidence to
its own outcomes:

    confidence' = sigmoid(scale * logit(confidence) + shift)

fit by damped Newton steps (each halved until the penalized loss falls) with a pull
towards the identity (scale 1, shift 0: PRIOR_WEIGHT pseudo-observations' worth), and
bounded (SCALE_BOUNDS, SHIFT_BOUNDS) so that a few odd verdicts never turn the model upside
down. It maps the *model's* confidence: a verdict's served confidence, already recalibrated,
is mapped back through the recalibration in force first (`Recalibration.invert`). Refit
after every such verdict (the last MAX_VERDICTS), kept in the organization's settings for
the confidence model it was fit for, read with its floor; an admin can drop it
(`reset_recalibration`). Plain Python: the query and write Lambdas import no numpy.

One query token's verdicts can move it (nothing ties a served confidence to a served
hit): the bounds cap how far, and the reset undoes it.
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
    model: str = ""  # the confidence model it was fit for ("": any, an older row)

    def fits(self, model: str) -> bool:
        """Whether it was fit for this confidence model (an older row: for any)."""
        return self.model in ("", model)

    def apply(self, confidence: float) -> float:
        return sigmoid(self.scale * logit(confidence) + self.shift)

    def invert(self, served: float) -> float:
        """The model's confidence that this recalibration served as `served`."""
        return sigmoid((logit(served) - self.shift) / self.scale)


def logit(p: float) -> float:
    p = min(max(p, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


def enough(outcomes: Sequence[bool]) -> bool:
    helpful = sum(outcomes)
    return len(outcomes) >= MIN_VERDICTS and min(helpful, len(outcomes) - helpful) >= MIN_EACH


def _loss(xs: Sequence[float], ys: Sequence[float], a: float, b: float) -> float:
    """The penalized negative log-likelihood of (scale a, shift b)."""
    total = 0.5 * PRIOR_WEIGHT * ((a - 1.0) ** 2 + b**2)
    for x, y in zip(xs, ys, strict=True):
        z = a * x + b
        # log(1 + e^z) - y z, without overflow
        total += (max(z, 0.0) + math.log1p(math.exp(-abs(z)))) - y * z
    return total


def fit(
    served: Sequence[tuple[float, bool]], model: str = "", current: Recalibration | None = None
) -> Recalibration | None:
    """The recalibration of these (model confidence, helpful) pairs, or None without
    enough of them. With `current`, the confidences are the served ones it produced, mapped
    back to the model's first."""
    if not enough([helpful for _, helpful in served]):
        return None
    raw = [c if current is None else current.invert(c) for c, _ in served]
    xs = [logit(c) for c in raw]
    ys = [1.0 if helpful else 0.0 for _, helpful in served]
    a, b = 1.0, 0.0
    loss = _loss(xs, ys, a, b)
    for _ in range(100):
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
        det = haa * hbb - hab * hab  # > 0: the prior makes the Hessian definite
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        step = 1.0
        while step > 1e-6:  # halve the step until the loss falls (damped Newton)
            trial = _loss(xs, ys, a - step * da, b - step * db)
            if trial <= loss:
                break
            step /= 2
        else:
            break
        a, b, loss = a - step * da, b - step * db, trial
        if abs(step * da) < 1e-9 and abs(step * db) < 1e-9:
            break
    return Recalibration(
        scale=min(max(a, SCALE_BOUNDS[0]), SCALE_BOUNDS[1]),
        shift=min(max(b, SHIFT_BOUNDS[0]), SHIFT_BOUNDS[1]),
        verdicts=len(served),
        model=model,
    )
