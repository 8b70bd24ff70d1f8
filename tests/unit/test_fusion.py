"""Score fusion: every candidate of either leg scored on both signals, each divided by
its best among the candidates, mixed LEXICAL_WEIGHT : 1 - LEXICAL_WEIGHT."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grandbo.memory.domain.fusion import LEXICAL_WEIGHT, score_fusion

W = LEXICAL_WEIGHT


def test_each_candidate_mixes_both_signals_over_their_best() -> None:
    fused = {
        f.key: f
        for f in score_fusion(
            [["a", "b"], ["b", "c"]], {"a": 4.0, "b": 2.0}, {"a": 0.3, "b": 0.6, "c": 0.5}
        )
    }
    assert fused["a"].score == pytest.approx(W * 1.0 + (1 - W) * 0.5)
    assert fused["b"].score == pytest.approx(W * 0.5 + (1 - W) * 1.0)
    assert fused["c"].score == pytest.approx((1 - W) * 0.5 / 0.6)  # shares no tag: 0 there
    assert fused["b"].ranks == (2, 1)
    assert fused["c"].ranks == (None, 2)


def test_a_candidate_one_leg_found_is_scored_by_the_other_leg_too() -> None:
    """The lexical leg's second hit is the nearest by far: the vector signal it has, though
    the vector leg did not list it (a cutoff, its depth), lifts it over the first."""
    fused = score_fusion(
        [["first", "second"], []], {"first": 3.0, "second": 2.9}, {"first": 0.1, "second": 0.9}
    )
    assert [f.key for f in fused] == ["second", "first"]


def test_best_on_both_legs_scores_one() -> None:
    fused = score_fusion([["x", "y"], ["x", "y"]], {"x": 5.0, "y": 1.0}, {"x": 0.8, "y": 0.2})
    assert fused[0].key == "x"
    assert fused[0].score == pytest.approx(1.0)


def test_without_a_vector_signal_the_lexical_order_stands() -> None:
    fused = score_fusion([["a", "b", "c"], []], {"a": 3.0, "b": 2.0, "c": 1.0}, {})
    assert [f.key for f in fused] == ["a", "b", "c"]
    assert fused[0].score == pytest.approx(W)


def test_negative_similarity_counts_zero_and_ties_keep_first_appearance() -> None:
    fused = score_fusion([["x", "y"], ["y", "x"]], {"x": 1.0, "y": 1.0}, {"x": -0.2, "y": -0.5})
    assert [f.key for f in fused] == ["x", "y"]
    assert fused[0].score == pytest.approx(fused[1].score) == pytest.approx(W)


def test_a_repeat_within_a_list_keeps_its_best_rank() -> None:
    fused = score_fusion([["a", "a", "b"], []], {"a": 2.0, "b": 1.0}, {})
    assert [(f.key, f.ranks) for f in fused] == [("a", (1, None)), ("b", (3, None))]


def test_empty_input_fuses_to_nothing() -> None:
    assert score_fusion([[], []], {}, {}) == []


@given(
    st.dictionaries(
        st.integers(0, 30),
        st.tuples(st.floats(0, 50, allow_nan=False), st.floats(-1, 1, allow_nan=False)),
        max_size=30,
    )
)
def test_scores_stay_within_zero_and_one_and_are_ordered(
    candidates: dict[int, tuple[float, float]],
) -> None:
    keys = list(candidates)
    fused = score_fusion(
        [keys[::2], keys[1::2]],
        {k: v[0] for k, v in candidates.items()},
        {k: v[1] for k, v in candidates.items()},
    )
    assert sorted(f.key for f in fused) == sorted(keys)
    scores = [f.score for f in fused]
    assert all(-1e-12 <= s <= 1.0 + 1e-12 for s in scores)
    assert all(round(a, 12) >= round(b, 12) for a, b in itertools.pairwise(scores))
