"""An organization's own verdicts recalibrate the confidence model (Platt scaling), and no
single caller, nor an import, can steer it.

What a verdict is worth to the fit:

- **The confidence is the server's.** A verdict is tied to the latest logged retrieval of
  its incident that served its entry, and the fit reads the confidence the retrieval log
  holds for that hit; a verdict no retrieval ties is recorded and shown, never fit. The
  `confidence` a caller sends with a verdict is ignored (nothing ties it to a served hit).
- **No source fills the fit.** A verdict's source is who gave it (its event's actor:
  `query:KEY`, `person:EMAIL`, `incident-closed:ID`, ...). Each verdict weighs 1, a
  trusted source's TRUSTED_WEIGHT (a person judging a hit, an incident's own outcome:
  neither is a bearer token anyone holding a query key can replay), and each source's
  weights are scaled down to at most SOURCE_CAP verdicts' worth; then so are the weights
  tied to the answers of each asker (the caller whose question chose the served
  confidence). Nothing is fit before MIN_SOURCES distinct sources gave MIN_WEIGHT
  verdicts' worth, MIN_EACH of it helpful and MIN_EACH not (not_helpful or misleading):
  one query token alone never recalibrates, and no caller is more than a fifth of the
  least fit. An organization whose every question comes from one agent key is not
  recalibrated from them: the model as fit serves it.
- **Imported verdicts are history** (migration 0033's `imported`), never training data.

The fit is two parameters mapping the model's confidence to the organization's outcomes,

    confidence' = sigmoid(scale * logit(confidence) + shift)

by damped Newton steps (each halved until the weighted, penalized loss falls) with a pull
towards the identity (scale 1, shift 0: PRIOR_WEIGHT verdicts' worth), its optimum within
SCALE_BOUNDS and SHIFT_BOUNDS. It maps the *model's* confidence: a served confidence,
already recalibrated, is mapped back through the recalibration in force first
(`Recalibration.invert`). Refit after every verdict (from the last MAX_VERDICTS), kept in
the organization's settings for the confidence model it was fit for, read with its floor;
an admin can drop it (`reset_recalibration`). Plain Python: the query and write Lambdas
import no numpy.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from grandbo.memory.domain.logistic import sigmoid

# how many verdicts' worth (weights summed), of each kind, and from how many sources
MIN_WEIGHT = 30.0
MIN_EACH = 5.0
MIN_SOURCES = 5
# at most this many verdicts' worth from one source, however many it gave, and from the
# answers of one asker, however many verdicts they tie: one caller is at most a fifth of
# the least fit (a third let one key move an unrelated 0.03 to 0.28, issue 43's review)
SOURCE_CAP = 6.0
# a verdict of a trusted source: a person's own (a curator reading the hit) or the closed
# incident's outcome (what the investigation established); a query key's verdicts are an
# agent's, and the key is the credential a flood comes from
TRUSTED_WEIGHT = 2.0
TRUSTED_SOURCES = ("person:", "incident-closed:")
MAX_VERDICTS = 500
PRIOR_WEIGHT = 5.0
# A recalibration corrects the model's level and steepness, never its judgement: scale
# > 0 keeps the order of any two hits, and at least 0.5 keeps their logits at least half
# as far apart as the model put them (0.25 let verdicts squeeze 0.01 and 0.99 to 0.24 and
# 0.76: nearly one confidence for everything). A shift of 2 moves a logit as far as a
# model's strongest signal does; 4 could push every hit under the floor or over it.
SCALE_BOUNDS = (0.5, 2.0)
SHIFT_BOUNDS = (-2.0, 2.0)
_EDGE = 1e-6
_ROUNDING = 1e-9


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


@dataclass(frozen=True, slots=True)
class ServedVerdict:
    """A verdict as the fit reads it: the confidence the server served its hit with (the
    retrieval log's), whether it helped, and who gave it (its event's actor)."""

    confidence: float
    helpful: bool
    source: str
    # who asked the question whose answer served the hit (the retrieval's caller): its
    # query chose the confidence, whoever gave the verdict ("": the source)
    asker: str = ""


def logit(p: float) -> float:
    p = min(max(p, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


def trust(source: str) -> float:
    """What one verdict of this source weighs before the cap."""
    return TRUSTED_WEIGHT if source.startswith(TRUSTED_SOURCES) else 1.0


def weights(verdicts: Sequence[ServedVerdict]) -> list[float]:
    """Each verdict's weight in the fit: its source's trust, scaled so that no source
    weighs more than SOURCE_CAP in all, then so that the answers of no asker do (a key
    that asks under an open incident chooses the confidences its outcomes are fit with:
    it is capped as a source of its own, however trusted the verdicts tied to it)."""
    given = Counter(v.source for v in verdicts)
    share = {
        source: min(1.0, SOURCE_CAP / (trust(source) * n)) * trust(source)
        for source, n in given.items()
    }
    first = [share[v.source] for v in verdicts]
    asked: dict[str, float] = defaultdict(float)
    for w, v in zip(first, verdicts, strict=True):
        asked[v.asker or v.source] += w
    return [
        w * min(1.0, SOURCE_CAP / asked[v.asker or v.source])
        for w, v in zip(first, verdicts, strict=True)
    ]


def enough(verdicts: Sequence[ServedVerdict]) -> bool:
    """Whether these verdicts may be fit: MIN_SOURCES sources, MIN_WEIGHT verdicts' worth,
    MIN_EACH of it each way."""
    if len({v.source for v in verdicts}) < MIN_SOURCES:
        return False
    ws = weights(verdicts)
    helpful = sum(w for w, v in zip(ws, verdicts, strict=True) if v.helpful)
    # weights are scaled shares: a sum that is the threshold may be a rounding under it
    return sum(ws) >= MIN_WEIGHT - _ROUNDING and min(helpful, sum(ws) - helpful) >= (
        MIN_EACH - _ROUNDING
    )


def _loss(
    xs: Sequence[float], ys: Sequence[float], ws: Sequence[float], a: float, b: float
) -> float:
    """The weighted, penalized negative log-likelihood of (scale a, shift b)."""
    total = 0.5 * PRIOR_WEIGHT * ((a - 1.0) ** 2 + b**2)
    for x, y, w in zip(xs, ys, ws, strict=True):
        z = a * x + b
        # log(1 + e^z) - y z, without overflow
        total += w * ((max(z, 0.0) + math.log1p(math.exp(-abs(z)))) - y * z)
    return total


def _descend(
    xs: Sequence[float],
    ys: Sequence[float],
    ws: Sequence[float],
    start: tuple[float, float],
    *,
    move_a: bool = True,
    move_b: bool = True,
) -> tuple[float, float]:
    """The loss's minimum over the coordinates it may move, from `start` (damped Newton:
    the loss is convex, the prior makes its Hessian definite)."""
    a, b = start
    loss = _loss(xs, ys, ws, a, b)
    for _ in range(100):
        ga = PRIOR_WEIGHT * (a - 1.0)
        gb = PRIOR_WEIGHT * b
        haa, hab, hbb = PRIOR_WEIGHT, 0.0, PRIOR_WEIGHT
        for x, y, w in zip(xs, ys, ws, strict=True):
            p = sigmoid(a * x + b)
            h = w * p * (1.0 - p)
            ga += w * (p - y) * x
            gb += w * (p - y)
            haa += h * x * x
            hab += h * x
            hbb += h
        if move_a and move_b:
            det = haa * hbb - hab * hab
            da = (hbb * ga - hab * gb) / det
            db = (haa * gb - hab * ga) / det
        else:
            da = ga / haa if move_a else 0.0
            db = gb / hbb if move_b else 0.0
        step = 1.0
        while step > 1e-6:  # halve the step until the loss falls (damped Newton)
            trial = _loss(xs, ys, ws, a - step * da, b - step * db)
            if trial <= loss:
                break
            step /= 2
        else:
            break
        a, b, loss = a - step * da, b - step * db, trial
        if abs(step * da) < 1e-9 and abs(step * db) < 1e-9:
            break
    return a, b


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def _bounded_optimum(
    xs: Sequence[float], ys: Sequence[float], ws: Sequence[float]
) -> tuple[float, float]:
    """The loss's minimum within the bounds: the free optimum if it lies inside, else the
    best of each edge's own optimum (the loss is convex: the bounded optimum is on an
    edge then, where it is the 1-D optimum clamped to the edge)."""
    a, b = _descend(xs, ys, ws, (1.0, 0.0))
    if _clamp(a, SCALE_BOUNDS) == a and _clamp(b, SHIFT_BOUNDS) == b:
        return a, b
    candidates = []
    for edge in SCALE_BOUNDS:
        _, on_edge = _descend(xs, ys, ws, (edge, _clamp(b, SHIFT_BOUNDS)), move_a=False)
        candidates.append((edge, _clamp(on_edge, SHIFT_BOUNDS)))
    for edge in SHIFT_BOUNDS:
        on_edge, _ = _descend(xs, ys, ws, (_clamp(a, SCALE_BOUNDS), edge), move_b=False)
        candidates.append((_clamp(on_edge, SCALE_BOUNDS), edge))
    return min(candidates, key=lambda ab: _loss(xs, ys, ws, *ab))


def fit(
    verdicts: Sequence[ServedVerdict], model: str = "", current: Recalibration | None = None
) -> Recalibration | None:
    """The recalibration these verdicts make, or None without enough of them (`enough`).
    With `current`, their served confidences are the ones it produced, mapped back to the
    model's first."""
    if not enough(verdicts):
        return None
    raw = [v.confidence if current is None else current.invert(v.confidence) for v in verdicts]
    xs = [logit(c) for c in raw]
    ys = [1.0 if v.helpful else 0.0 for v in verdicts]
    scale, shift = _bounded_optimum(xs, ys, weights(verdicts))
    return Recalibration(scale=scale, shift=shift, verdicts=len(verdicts), model=model)
