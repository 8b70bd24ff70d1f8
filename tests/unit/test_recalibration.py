"""An organization's recalibration (issue 43, point 3): enough verdicts from enough
sources, no source weighing more than its cap, the fit's optimum within bounds that keep
the model's order."""

from __future__ import annotations

import math
import random

import pytest

from grandbo.memory.domain import recalibration
from grandbo.memory.domain.logistic import sigmoid
from grandbo.memory.domain.recalibration import (
    SCALE_BOUNDS,
    SHIFT_BOUNDS,
    SOURCE_CAP,
    Recalibration,
    ServedVerdict,
    fit,
    weights,
)


def _spread(pairs: list[tuple[float, bool]], sources: int) -> list[ServedVerdict]:
    """The pairs as verdicts of `sources` query tokens, in turn, each on its own incident."""
    return [
        ServedVerdict(confidence, helpful, f"query:k{i % sources}", incident=f"INC-{i}")
        for i, (confidence, helpful) in enumerate(pairs)
    ]


def test_nothing_is_fit_without_enough_verdicts_of_both_kinds_from_five_sources() -> None:
    balanced = [(0.5, True)] * 15 + [(0.5, False)] * 15
    assert fit(_spread([(0.5, True)] * 40, 10)) is None  # one kind only
    assert fit(_spread([(0.5, True)] * 10 + [(0.5, False)] * 10, 10)) is None  # too few
    assert fit(_spread(balanced * 10, 4)) is None  # four sources: 24 verdicts' worth at most
    fitted = fit(_spread(balanced, 5))
    assert fitted is not None
    assert fitted.verdicts == 30


def test_one_query_token_never_recalibrates_however_many_verdicts_it_gives() -> None:
    flood = [(0.011, True)] * 250 + [(0.9, False)] * 250
    assert fit([ServedVerdict(c, h, "query:one") for c, h in flood]) is None


def test_no_source_weighs_more_than_its_cap_and_a_trusted_one_reaches_it_sooner() -> None:
    verdicts = (
        [ServedVerdict(0.5, True, "query:flood")] * 120
        + [ServedVerdict(0.5, True, "query:agent")] * 4
        + [ServedVerdict(0.5, False, "person:ana@example.com")] * 3
        + [ServedVerdict(0.5, False, "incident-closed:INC-7")] * 25
        + [ServedVerdict(0.5, False, f"incident-closed:INC-{n}") for n in range(100)]
    )
    ws = weights(verdicts)
    by_source: dict[str, float] = {}
    for w, v in zip(ws, verdicts, strict=True):
        by_source[v.source] = by_source.get(v.source, 0.0) + w
    assert by_source["query:flood"] == pytest.approx(SOURCE_CAP)
    assert by_source["query:agent"] == pytest.approx(4.0)
    # a person's verdict and an incident's outcome weigh double a token's, to the same cap
    assert by_source["person:ana@example.com"] == pytest.approx(min(6.0, SOURCE_CAP))
    # and the incident channel is one source, whatever incidents its events name: 125
    # outcomes of 101 incidents weigh the cap of one source in all (issue 50)
    incidents = sum(v for source, v in by_source.items() if source.startswith("incident-closed"))
    assert incidents == pytest.approx(SOURCE_CAP)


def test_the_answers_of_one_asker_weigh_no_more_than_a_source_however_trusted_the_verdicts() -> (
    None
):
    # one key asked under twelve open incidents and chose what each entry was served at;
    # the incidents' trusted outcomes are tied to its answers
    tied = [
        ServedVerdict(0.001, True, f"incident-closed:INC-{n}", asker="query:attacker")
        for n in range(12)
        for _ in range(3)
    ]
    honest = [
        ServedVerdict(0.5, n % 2 == 0, f"person:p{n % 5}@example.com", asker=f"query:agent{n % 5}")
        for n in range(40)
    ]
    ws = weights(tied + honest)
    assert sum(ws[: len(tied)]) == pytest.approx(SOURCE_CAP)
    assert sum(ws[len(tied) :]) >= 4 * SOURCE_CAP


def test_a_flood_from_one_source_weighs_what_its_cap_of_verdicts_would() -> None:
    rng = random.Random(5)
    honest = []
    for i in range(200):
        z = rng.uniform(-4, 4)
        honest.append(
            ServedVerdict(
                sigmoid(z), rng.random() < sigmoid(z), f"query:k{i % 10}", incident=f"I{i}"
            )
        )
    flood = [ServedVerdict(0.011, True, "query:attacker", incident="INC-X")]
    capped = fit(honest + flood * int(SOURCE_CAP))
    flooded = fit(honest + flood * 400)
    assert capped is not None
    assert flooded is not None
    assert flooded.scale == pytest.approx(capped.scale, abs=1e-6)
    assert flooded.shift == pytest.approx(capped.shift, abs=1e-6)
    # and its cap's worth at the model's extreme would decide the map: it is left out
    alone = fit(honest)
    assert alone is not None
    assert (capped.scale, capped.shift, capped.verdicts) == (alone.scale, alone.shift, 200)


def test_an_overconfident_model_is_pulled_down_and_stays_monotonic() -> None:
    # served at 0.8, helpful one time in five: the organization's outcomes say 0.2
    served = _spread([(0.8, i % 5 == 0) for i in range(100)] + [(0.1, False)] * 20, 12)
    fitted = fit(served)
    assert fitted is not None
    assert fitted.apply(0.8) < 0.5
    assert fitted.apply(0.05) < fitted.apply(0.5) < fitted.apply(0.95)  # order kept
    assert SCALE_BOUNDS[0] <= fitted.scale <= SCALE_BOUNDS[1]


@pytest.mark.parametrize(
    "served",
    [
        # every confident hit refuted, every unlikely one confirmed: the model upside down
        [(0.99, False)] * 60 + [(0.01, True)] * 60,
        # every hit confirmed: push everything up as far as it goes
        [(0.01, True)] * 110 + [(0.5, False)] * 10,
        # every hit refuted
        [(0.99, False)] * 110 + [(0.5, True)] * 10,
    ],
)
def test_extreme_verdicts_keep_the_models_order_and_never_flatten_it(
    served: list[tuple[float, bool]],
) -> None:
    fitted = fit(_spread(served, 12))
    assert fitted is not None
    assert SCALE_BOUNDS[0] <= fitted.scale <= SCALE_BOUNDS[1]
    assert SHIFT_BOUNDS[0] <= fitted.shift <= SHIFT_BOUNDS[1]
    low, high = 0.2, 0.3
    assert fitted.apply(low) < fitted.apply(high)
    # two hits stay at least half as far apart (in logits) as the model put them
    gap = recalibration.logit(fitted.apply(high)) - recalibration.logit(fitted.apply(low))
    assert gap >= SCALE_BOUNDS[0] * (recalibration.logit(high) - recalibration.logit(low)) - 1e-9


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1e-300, 1 - 1e-16])
def test_a_recalibration_is_finite_at_the_edges(confidence: float) -> None:
    fitted = Recalibration(scale=SCALE_BOUNDS[1], shift=SHIFT_BOUNDS[0], verdicts=30)
    value = fitted.apply(confidence)
    assert 0.0 <= value <= 1.0
    assert math.isfinite(value)


def _bounded_grid_optimum(served: list[ServedVerdict]) -> tuple[float, float]:
    """A brute-force grid search of the same loss within the bounds (the reference)."""
    from grandbo.memory.domain.recalibration import _loss, logit

    xs = [logit(v.confidence) for v in served]
    ys = [1.0 if v.helpful else 0.0 for v in served]
    ws = weights(served)
    grid = [
        (a / 100, b / 100)
        for a in range(int(SCALE_BOUNDS[0] * 100), int(SCALE_BOUNDS[1] * 100) + 1, 2)
        for b in range(int(SHIFT_BOUNDS[0] * 100), int(SHIFT_BOUNDS[1] * 100) + 1, 4)
    ]
    return min(grid, key=lambda ab: _loss(xs, ys, ws, *ab))


@pytest.mark.parametrize(("truth", "seed"), [((0.3, -1.0), 0), ((0.3, -1.0), 1), ((0.8, -0.5), 2)])
def test_the_fit_reaches_the_bounded_optimum_on_spread_confidences(
    truth: tuple[float, float], seed: int
) -> None:
    """Confidences spread over logits -5..5: an overconfident model (truth 0.3: its free
    optimum is under the scale's bound, so the bounded one is on that edge, with the
    shift best for it), and one within the bounds."""
    rng = random.Random(seed)
    served = []
    for i in range(200):
        z = rng.uniform(-5, 5)
        served.append(
            ServedVerdict(
                sigmoid(z),
                rng.random() < sigmoid(truth[0] * z + truth[1]),
                f"q{i}",
                incident=f"INC-{i}",
            )
        )
    fitted = fit(served)
    assert fitted is not None
    a, b = _bounded_grid_optimum(served)
    assert fitted.scale == pytest.approx(a, abs=0.03)
    assert fitted.shift == pytest.approx(b, abs=0.06)
    assert fitted.scale < 1.0  # pulled down, not pushed up
    assert fitted.apply(0.95) < 0.95


def test_the_fit_maps_served_confidences_back_to_the_models_first() -> None:
    current = Recalibration(scale=0.7, shift=-1.0, verdicts=30)
    for p in (0.01, 0.3, 0.5, 0.9, 0.999):
        assert current.invert(current.apply(p)) == pytest.approx(p, rel=1e-6)
    rng = random.Random(3)
    raw = [sigmoid(rng.uniform(-4, 4)) for _ in range(300)]
    outcomes = [rng.random() < current.apply(p) for p in raw]  # the truth is `current`
    # served through `current`, fit with it: the fit is `current` itself (near)
    fitted = fit(
        _spread([(current.apply(p), o) for p, o in zip(raw, outcomes, strict=True)], 30),
        "m",
        current,
    )
    assert fitted is not None
    assert fitted.model == "m"
    assert fitted.scale == pytest.approx(0.7, abs=0.15)
    assert fitted.shift == pytest.approx(-1.0, abs=0.35)


# -- issue 50, point 4: outcomes no sender can steer ---------------------------------------


def _honest(sources: int, incidents: int, askers: int, n: int = 60) -> list[ServedVerdict]:
    """`n` balanced verdicts of `sources` people, on the answers of `askers` keys about
    `incidents` incidents, each in turn: what a fit would take but for the rule tested."""
    return [
        ServedVerdict(
            0.3 if i % 2 else 0.7,
            i % 2 == 0,
            f"person:p{i % sources}@example.com",
            asker=f"k{i % askers}",
            incident=f"INC-{i % incidents}",
        )
        for i in range(n)
    ]


def test_the_incident_channel_is_one_source_whatever_incidents_it_names() -> None:
    # one sender's events name 30 incidents, on the answers of six askers: one source
    crafted = [
        ServedVerdict(
            0.01 if n % 2 else 0.9, n % 2 == 1, f"incident-closed:ATK-{n}", f"k{n % 6}", f"ATK-{n}"
        )
        for n in range(30)
        for _ in range(2)
    ]
    assert recalibration.source_of("incident-closed:ATK-7") == recalibration.INCIDENT_SOURCE
    assert recalibration.source_of("person:ana@example.com") == "person:ana@example.com"
    assert fit(crafted) is None  # before issue 50: 30 sources, and a fit at the bounds
    assert sum(weights(crafted)) == pytest.approx(SOURCE_CAP)
    # still trusted: a verdict of the channel weighs double a query key's, to the cap
    assert recalibration.trust("incident-closed:INC-1") == recalibration.TRUSTED_WEIGHT
    assert sum(weights(crafted[:2])) == pytest.approx(2 * recalibration.TRUSTED_WEIGHT)
    # with four people's verdicts it is the fifth source, capped, and still it would
    # decide the map (its outcomes all at the model's extremes): it is left out, and four
    # sources are too few
    with_people = crafted + _honest(4, 10, 5)
    channel = [w for w, v in zip(weights(with_people), with_people, strict=True) if v in crafted]
    assert sum(channel) <= SOURCE_CAP + 1e-9
    assert recalibration.enough(with_people)
    assert fit(with_people) is None
    # with five people's, the map is theirs alone
    people = _honest(5, 10, 5)
    theirs = fit(people)
    assert theirs is not None
    assert fit(crafted + people) == theirs


def test_nothing_is_fit_from_verdicts_about_fewer_than_five_incidents() -> None:
    assert recalibration.MIN_INCIDENTS == 5
    assert fit(_honest(5, 4, 5)) is None
    assert fit(_honest(5, 5, 5)) is not None
    # a verdict that names no incident counts for none
    unnamed = [
        ServedVerdict(v.confidence, v.helpful, v.source, v.asker, "") for v in _honest(5, 5, 5)
    ]
    assert fit(unnamed) is None


def test_nothing_is_fit_on_the_answers_of_fewer_than_five_askers() -> None:
    assert fit(_honest(5, 10, 4)) is None
    assert fit(_honest(5, 10, 5)) is not None
    # the rule stands by itself, whatever the askers' cap allows: with the cap lifted,
    # four askers are still too few
    lifted = recalibration.SOURCE_CAP
    try:
        recalibration.SOURCE_CAP = 1e9
        assert recalibration.enough(_honest(5, 10, 5))
        assert not recalibration.enough(_honest(5, 10, 4))
    finally:
        recalibration.SOURCE_CAP = lifted


def test_no_party_moves_a_served_confidence_by_more_than_its_bound() -> None:
    """A source, or the answers of one asker, whose verdicts would move a served
    confidence by more than MAX_PARTY_MOVE is left out: the most decisive first."""
    rng = random.Random(7)
    honest = []
    for i in range(300):
        z = rng.uniform(-5, 3)
        honest.append(
            ServedVerdict(
                sigmoid(z), rng.random() < sigmoid(z), f"person:p{i % 10}", f"k{i % 10}", f"I{i}"
            )
        )
    alone = fit(honest)
    assert alone is not None
    # one key asked under 20 incidents; their honest outcomes, all the weakest confirmed
    # and the surest refuted, are tied to its answers: its answers are left out
    steered = [
        ServedVerdict(0.001 if n % 2 else 0.97, n % 2 == 1, f"person:p{n % 10}", "k-steer", f"S{n}")
        for n in range(40)
    ]
    assert recalibration.enough(honest + steered)
    with_steered = fit(honest + steered)
    assert with_steered == alone
    unguarded = recalibration._optimum(honest + steered, [v.confidence for v in honest + steered])
    assert recalibration._moved(unguarded, (alone.scale, alone.shift)) > 0.1  # it would have
    # and the bound holds for each party of what is fit
    from grandbo.memory.domain.recalibration import MAX_PARTY_MOVE, _moved, _optimum, _span

    assert alone.verdicts == 300
    full = (alone.scale, alone.shift)
    for k in range(10):
        rest = [v for v in honest if v.source != f"person:p{k}"]
        where = _span([v.confidence for v in honest])
        assert _moved(full, _optimum(rest, [v.confidence for v in rest]), where) <= MAX_PARTY_MOVE


def test_with_many_parties_the_screen_leaves_out_what_a_refit_of_each_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past EXACT_PARTIES, only the parties a one-step estimate suspects are refit without:
    the fit is the one a refit of every party makes."""
    rng = random.Random(11)
    honest = []
    for i in range(300):
        z = rng.uniform(-6, 4)
        honest.append(
            ServedVerdict(
                sigmoid(z), rng.random() < sigmoid(z), f"person:p{i % 60}", f"k{i % 60}", f"I{i}"
            )
        )
    steered = [
        ServedVerdict(0.001 if n % 2 else 0.97, n % 2 == 1, "incident-closed:A", "k-att", f"S{n}")
        for n in range(40)
    ]
    assert recalibration.EXACT_PARTIES < 120  # 60 sources, 60 askers: screened
    screened = (fit(honest), fit(honest + steered))
    monkeypatch.setattr(recalibration, "EXACT_PARTIES", 10**6)
    assert screened == (fit(honest), fit(honest + steered))
    assert screened[0] is not None
