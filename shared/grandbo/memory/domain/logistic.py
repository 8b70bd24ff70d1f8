"""The logistic function, for the model and the recalibration (no imports: either may be
loaded first)."""

from __future__ import annotations

import math


def sigmoid(x: float) -> float:
    """1 / (1 + e^-x), without overflow at either end."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)
