"""How well a confidence separates and how true it is: the measures the evaluation, the
confidence fit from an organization's lake and the offline fit report alike."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The probability that a positive scores above a negative (ties count half); None
    without one of each."""
    if not positives or not negatives:
        return None
    ordered = sorted(negatives)
    wins = 0.0
    for p in positives:
        below = bisect.bisect_left(ordered, p)
        wins += below + (bisect.bisect_right(ordered, p) - below) / 2
    return wins / (len(positives) * len(negatives))


def calibration_error(confidences: Sequence[float], outcomes: Sequence[bool | int]) -> float | None:
    """Expected calibration error over ten equal-width bins of confidence; None for none."""
    if not confidences:
        return None
    bins: list[list[tuple[float, bool | int]]] = [[] for _ in range(10)]
    for c, o in zip(confidences, outcomes, strict=True):
        bins[min(int(c * 10), 9)].append((c, o))
    total = len(confidences)
    return sum(
        len(b) / total * abs(statistics.fmean(c for c, _ in b) - statistics.fmean(o for _, o in b))
        for b in bins
        if b
    )
