"""An organization's own verdicts recalibrate the confidence model (Platt scaling), and no
single caller, no sender of incident events, nor an import, can steer it.

What a verdict is worth to the fit:

- **The confidence is the server's.** A verdict is tied to the latest logged retrieval of
  its incident that served its entry, and the fit reads the confidence the retrieval log
  holds for that hit; a verdict no retrieval ties is recorded and shown, never fit. The
  `confidence` a caller sends with a verdict is ignored (nothing ties it to a served hit).
- **No source fills the fit.** A verdict's source is who gave it (its event's actor:
  `query:KEY`, `person:EMAIL`, ...), and the incident channel is one source of the
  organization's (`incident-closed`, whatever incident an event names: whoever may send
  incident events may name any incident, issue 50). Each verdict weighs 1, a trusted
  source's TRUSTED_WEIGHT (a person judging a hit, an incident's own outcome: neither is a
  bearer token anyone holding a query key can replay), and each source's weights are
  scaled down to at most SOURCE_CAP verdicts' worth; then so are the weights tied to the
  answers of each asker (the caller whose question chose the served confidence, by its
  identity: a query key is one asker whichever door it asked through). Nothing is fit
  before MIN_SOURCES distinct sources gave MIN_WEIGHT verdicts' worth, MIN_EACH of it
  helpful and MIN_EACH not (not_helpful or misleading), on the answers of MIN_ASKERS
  askers, about MIN_INCIDENTS incidents: one query token alone never recalibrates, and no
  caller is more than a fifth of the least fit. An organization whose every question
  comes from one agent key is not recalibrated from them: the model as fit serves it.
- **No party decides it.** A party (a source, or the answers of one asker) whose
  verdicts, left out, would move a served confidence by more than MAX_PARTY_MOVE is left
  out of the fit (`fit`): a capped weight alone does not bound a party whose verdicts sit
  at the model's extremes.
- **The window is the tied verdicts'.** A fit reads the latest MAX_VERDICTS verdicts the
  retrieval log ties, at most MAX_PER_SOURCE of them from one source: verdicts tied to
  nothing, or one source's flood, never push the others out of it.
- **An admin has the last word.** A reset starts a new epoch: every later fit ignores the
  verdicts recorded before it, and those on answers served before it (served through the
  map it dropped). A verdict an admin removed (an event of its own: who, when, why) is
  never fit again.
- **Imported verdicts are history** (migration 0033's `imported`), never training data;
  so is an imported removal.

The fit is two parameters mapping the model's confidence to the organization's outcomes,

    confidence' = sigmoid(scale * logit(confidence) + shift)

by damped Newton steps (each halved until the weighted, penalized loss falls) with a pull
towards the identity (scale 1, shift 0: PRIOR_WEIGHT verdicts' worth), its optimum within
SCALE_BOUNDS and SHIFT_BOUNDS. It maps the *model's* confidence: a served confidence,
already recalibrated, is mapped back through the recalibration in force first
(`Recalibration.invert`). Refit after every verdict (from the last MAX_VERDICTS), kept in
the organization's settings for the confidence model it was fit for, read with its floor;
an admin can drop it (`reset_recalibration`, a new epoch). Plain Python: the query and
write Lambdas import no numpy.
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
# about how many incidents, on the answers of how many askers (by identity): one sender
# of incident events naming its own incidents, or one key asking under them, is neither.
# The askers' cap (SOURCE_CAP each) already needs MIN_WEIGHT / SOURCE_CAP of them: the
# rule says so in its own words, and holds whatever either constant becomes
MIN_INCIDENTS = 5
MIN_ASKERS = 5
# at most this many verdicts' worth from one source, however many it gave, and from the
# answers of one asker, however many verdicts they tie: one caller is at most a fifth of
# the least fit (a third let one key move an unrelated 0.03 to 0.28, issue 43's review)
SOURCE_CAP = 6.0
# a verdict of a trusted source: a person's own (a curator reading the hit) or the closed
# incident's outcome (what the investigation established); a query key's verdicts are an
# agent's, and the key is the credential a flood comes from
TRUSTED_WEIGHT = 2.0
TRUSTED_SOURCES = ("person:", "incident-closed")
# the incident channel's actors (`incident-closed:ID`, grandbo.memory.incidents) are one
# source: the channel, not the incident it names
INCIDENT_ACTOR_PREFIX = "incident-closed:"
INCIDENT_SOURCE = "incident-closed"
# the window a fit reads: the latest tied verdicts, at most MAX_PER_SOURCE of one source
MAX_VERDICTS = 500
MAX_PER_SOURCE = 100
PRIOR_WEIGHT = 5.0
# A recalibration corrects the model's level and steepness, never its judgement: scale
# > 0 keeps the order of any two hits, and at least 0.5 keeps their logits at least half
# as far apart as the model put them (0.25 let verdicts squeeze 0.01 and 0.99 to 0.24 and
# 0.76: nearly one confidence for everything). A shift of 2 moves a logit as far as a
# model's strongest signal does; 4 could push every hit under the floor or over it.
SCALE_BOUNDS = (0.5, 2.0)
SHIFT_BOUNDS = (-2.0, 2.0)
# no party (one source, or the answers of one asker) moves a served confidence further:
# a party that would is left out of the fit, at most MAX_LEFT_OUT of them
MAX_PARTY_MOVE = 0.04
MAX_LEFT_OUT = 5
# up to this many parties each is refit without; past it, only those a one-step estimate
# says may move a confidence by a quarter of the bound (a refit is ~2.5 ms at 500 verdicts)
EXACT_PARTIES = 40
_EDGE = 1e-6
_ROUNDING = 1e-9
# where two maps are compared: logits -8..8 (confidences 0.0003..0.9997)
_GRID = tuple(z / 4 for z in range(-32, 33))


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
    # the incident it judges an answer of ("": unknown, a verdict of its own)
    incident: str = ""


def logit(p: float) -> float:
    p = min(max(p, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


def source_of(actor: str) -> str:
    """The source a verdict of this actor counts under: the actor itself, but one for the
    whole incident channel (`incident-closed:ID` of any ID is `incident-closed`)."""
    return INCIDENT_SOURCE if actor.startswith(INCIDENT_ACTOR_PREFIX) else actor


def trust(source: str) -> float:
    """What one verdict of this source weighs before the cap."""
    return TRUSTED_WEIGHT if source_of(source).startswith(TRUSTED_SOURCES) else 1.0


def weights(verdicts: Sequence[ServedVerdict]) -> list[float]:
    """Each verdict's weight in the fit: its source's trust, scaled so that no source
    weighs more than SOURCE_CAP in all (the incident channel one source, whatever
    incidents it names), then so that the answers of no asker do (a key that asks under
    an open incident chooses the confidences its outcomes are fit with: it is capped as a
    source of its own, however trusted the verdicts tied to it)."""
    sources = [source_of(v.source) for v in verdicts]
    given = Counter(sources)
    share = {
        source: min(1.0, SOURCE_CAP / (trust(source) * n)) * trust(source)
        for source, n in given.items()
    }
    first = [share[source] for source in sources]
    askers = [v.asker or source for v, source in zip(verdicts, sources, strict=True)]
    asked: dict[str, float] = defaultdict(float)
    for w, asker in zip(first, askers, strict=True):
        asked[asker] += w
    return [w * min(1.0, SOURCE_CAP / asked[asker]) for w, asker in zip(first, askers, strict=True)]


def enough(verdicts: Sequence[ServedVerdict]) -> bool:
    """Whether these verdicts may be fit: MIN_SOURCES sources, MIN_INCIDENTS incidents,
    MIN_ASKERS askers, MIN_WEIGHT verdicts' worth, MIN_EACH of it each way."""
    if len({source_of(v.source) for v in verdicts}) < MIN_SOURCES:
        return False
    if len({v.incident for v in verdicts if v.incident}) < MIN_INCIDENTS:
        return False
    if len({v.asker or source_of(v.source) for v in verdicts}) < MIN_ASKERS:
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


def _optimum(verdicts: Sequence[ServedVerdict], raw: Sequence[float]) -> tuple[float, float]:
    """The bounded optimum of these verdicts, at their model confidences `raw`."""
    xs = [logit(c) for c in raw]
    ys = [1.0 if v.helpful else 0.0 for v in verdicts]
    return _bounded_optimum(xs, ys, weights(verdicts))


def _span(raw: Sequence[float]) -> tuple[float, ...]:
    """Where a fit of verdicts at these model confidences is compared with another: the
    grid's logits between the least and the most confident of them, both ends included
    (beyond them, two fits differ by what neither was shown)."""
    low, high = min(logit(c) for c in raw), max(logit(c) for c in raw)
    return (low, *(z for z in _GRID if low < z < high), high)


def _moved(
    first: tuple[float, float], second: tuple[float, float], where: Sequence[float] = ()
) -> float:
    """The most two maps serve a confidence apart, at the logits `where` (the grid of
    logits -8..8 without them)."""
    return max(
        abs(sigmoid(first[0] * z + first[1]) - sigmoid(second[0] * z + second[1]))
        for z in (where or _GRID)
    )


def _estimated_moves(
    full: tuple[float, float],
    xs: Sequence[float],
    ys: Sequence[float],
    ws: Sequence[float],
    by_party: dict[str, set[int]],
    where: Sequence[float],
) -> dict[str, float]:
    """What leaving each party out would move a served confidence, estimated by one Newton
    step from the fit of all (the party's gradient through the Hessian of the rest): the
    screen that spares an organization of many parties a refit for each."""
    a, b = full
    curvature, slope = [], []
    total = [PRIOR_WEIGHT, 0.0, PRIOR_WEIGHT]
    for x, y, w in zip(xs, ys, ws, strict=True):
        q = sigmoid(a * x + b)
        h = w * q * (1.0 - q)
        curvature.append((h * x * x, h * x, h))
        slope.append((w * (q - y) * x, w * (q - y)))
        total = [total[0] + h * x * x, total[1] + h * x, total[2] + h]
    moves = {}
    for party, theirs in by_party.items():
        haa, hab, hbb = total
        ga = gb = 0.0
        for i in theirs:
            haa, hab, hbb = haa - curvature[i][0], hab - curvature[i][1], hbb - curvature[i][2]
            ga, gb = ga + slope[i][0], gb + slope[i][1]
        det = haa * hbb - hab * hab
        if det <= 0.0:  # cannot be told: refit
            moves[party] = math.inf
            continue
        step = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det)
        moves[party] = _moved(full, (a + step[0], b + step[1]), where)
    return moves


def _parties(verdict: ServedVerdict) -> tuple[str, str]:
    """Who a verdict speaks for: its source, and the asker whose answer it judges."""
    source = source_of(verdict.source)
    return f"source {source}", f"asker {verdict.asker or source}"


def fit(
    verdicts: Sequence[ServedVerdict], model: str = "", current: Recalibration | None = None
) -> Recalibration | None:
    """The recalibration these verdicts make, or None without enough of them (`enough`).
    With `current`, their served confidences are the ones it produced, mapped back to the
    model's first.

    No party decides it: a party (a source, or an asker) whose verdicts, left out, would
    move a served confidence (between the least and the most confident verdict fit) by
    more than MAX_PARTY_MOVE is left out of the fit, the most decisive first, at most
    MAX_LEFT_OUT of them (then nothing is fit: the model serves).
    A capped weight alone does not bound a party: one source's 6 verdicts' worth, all at
    the model's extremes (a 0.001 hit confirmed, a 0.95 one refuted), moved an honest
    organization's map from scale 1.16 to the bound, 0.5 (issue 50)."""
    if not enough(verdicts):
        return None
    raw = [v.confidence if current is None else current.invert(v.confidence) for v in verdicts]
    kept = list(range(len(verdicts)))
    for _ in range(MAX_LEFT_OUT + 1):
        chosen = [verdicts[i] for i in kept]
        if not enough(chosen):
            return None
        xs = [logit(raw[i]) for i in kept]
        ys = [1.0 if v.helpful else 0.0 for v in chosen]
        full = _bounded_optimum(xs, ys, weights(chosen))
        where = _span([raw[i] for i in kept])
        by_party: dict[str, set[int]] = defaultdict(set)  # party -> positions in `kept`
        for position, v in enumerate(chosen):
            for party in _parties(v):
                by_party[party].add(position)
        suspects = set(by_party)
        if len(by_party) > EXACT_PARTIES:  # many parties: refit only the suspects
            estimated = _estimated_moves(full, xs, ys, weights(chosen), by_party, where)
            suspects = {party for party, move in estimated.items() if move > MAX_PARTY_MOVE / 4}
        moves = {}
        for party in suspects:
            rest = [i for position, i in enumerate(kept) if position not in by_party[party]]
            moves[party] = _moved(
                full, _optimum([verdicts[i] for i in rest], [raw[i] for i in rest]), where
            )
        decisive = max(moves, key=lambda party: (moves[party], party), default=None)
        if decisive is None or moves[decisive] <= MAX_PARTY_MOVE:
            scale, shift = full
            return Recalibration(scale=scale, shift=shift, verdicts=len(kept), model=model)
        kept = [i for position, i in enumerate(kept) if position not in by_party[decisive]]
    return None
