"""The separation and calibration measures every report shares (the evaluation, the lake
fit, the offline fit): the sorted AUROC is the pairwise count, ties half."""

from __future__ import annotations

import random

import pytest

from grandbo.memory.domain.measures import auroc, calibration_error


def _pairwise(positives: list[float], negatives: list[float]) -> float:
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


@pytest.mark.parametrize("seed", range(5))
def test_auroc_is_the_pairwise_count_ties_half(seed: int) -> None:
    rng = random.Random(seed)
    # rounded: many ties between and within the two sides
    positives = [round(rng.random(), 1) for _ in range(40)]
    negatives = [round(rng.random() * 0.8, 1) for _ in range(55)]
    assert auroc(positives, negatives) == pytest.approx(_pairwise(positives, negatives))
    assert auroc([], negatives) is None
    assert auroc(positives, []) is None


def test_calibration_error_weighs_each_bin_by_its_share() -> None:
    # two in the 0.9 bin, right once (0.9 against 0.5), two in the 0.1 bin, never right
    assert calibration_error([0.9, 0.9, 0.1, 0.1], [1, 0, 0, 0]) == pytest.approx(
        0.5 * 0.4 + 0.5 * 0.1
    )
    assert calibration_error([], []) is None
