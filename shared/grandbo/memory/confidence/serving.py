"""The floor: a hit under it is withheld, and the answer says so in its metadata and, when
nothing is left, in words an agent and a person read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grandbo.errors import InvalidInputError
from grandbo.memory.confidence.model import ConfidenceModel

NO_PRECEDENT = (
    "Memory holds nothing close to this topic: no past incident or lesson reached the "
    "confidence floor ({floor}). Investigate it as new."
)
SOME_WITHHELD = "{count} weaker candidate(s) under the confidence floor ({floor}) withheld."


def validate_min_confidence(value: object) -> float | None:
    """A request's or a setting's floor: a number from 0 to 1 (0 withholds nothing)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError("min_confidence", "must be a number from 0 to 1")
    floor = float(value)
    if not 0.0 <= floor <= 1.0:  # NaN fails both comparisons too
        raise InvalidInputError("min_confidence", f"must be from 0 to 1, got {value}")
    return floor


def withholding(
    model: ConfidenceModel, floor: float, withheld: Sequence[float], served: Sequence[object]
) -> dict[str, Any]:
    """The metadata fields that say what the floor withheld (`QueryMetadata`)."""
    shown = f"{floor:g}"
    if not served:
        message = NO_PRECEDENT.format(floor=shown)
    elif withheld:
        message = SOME_WITHHELD.format(count=len(withheld), floor=shown)
    else:
        message = None
    return {
        "confidence_model": model.name,
        "ranking": "confidence" if model.ranks else "fused",
        "min_confidence": floor,
        "withheld": len(withheld),
        "withheld_best_confidence": round(max(withheld), 4) if withheld else None,
        "no_precedent": not served,
        "message": message,
    }
