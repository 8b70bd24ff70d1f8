"""Reciprocal Rank Fusion, k = 60."""

from __future__ import annotations

import pytest

from grandbo.memory.fusion import reciprocal_rank_fusion


def test_scores_sum_one_over_k_plus_rank_across_lists() -> None:
    fused = {f.key: f for f in reciprocal_rank_fusion([["a", "b"], ["b", "c"]])}
    assert fused["a"].score == pytest.approx(1 / 61)
    assert fused["b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"].score == pytest.approx(1 / 62)
    assert fused["b"].ranks == (2, 1)
    assert fused["c"].ranks == (None, 2)


def test_an_entry_in_both_lists_beats_top_entries_of_one_list() -> None:
    lexical = ["l1", "l2", "l3", "l4", "l5", "both"]
    vector = ["v1", "v2", "v3", "v4", "v5", "both"]
    fused = reciprocal_rank_fusion([lexical, vector])
    assert fused[0].key == "both"  # 2/66 > 1/61: ranked 6th in each, first when fused


def test_ties_keep_first_appearance_order() -> None:
    fused = reciprocal_rank_fusion([["x", "y"], ["y", "x"]])
    assert [f.key for f in fused] == ["x", "y"]
    assert fused[0].score == pytest.approx(fused[1].score)


def test_candidates_present_in_one_list_only_are_kept() -> None:
    fused = reciprocal_rank_fusion([[], ["only"]])
    assert [(f.key, f.ranks) for f in fused] == [("only", (None, 1))]


def test_a_duplicate_within_a_list_counts_once_at_its_best_rank() -> None:
    fused = reciprocal_rank_fusion([["a", "a", "b"]])
    assert fused[0].score == pytest.approx(1 / 61)
    assert fused[1].score == pytest.approx(1 / 63)


def test_empty_input_fuses_to_nothing() -> None:
    assert reciprocal_rank_fusion([[], []]) == []
