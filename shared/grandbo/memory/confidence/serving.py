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
    floor = float(value) + 0.0  # -0.0 is 0.0
    if not 0.0 <= floor <= 1.0:  # NaN fails both comparisons too
        raise InvalidInputError("min_confidence", f"must be from 0 to 1, got {value}")
    return floor


def reaches(confidence: float, floor: float) -> bool:
    """Whether a confidence reaches the floor, as shown (to 4 places): a floor set to a
    hit's shown confidence keeps that hit."""
    return round(confidence, 4) >= floor


def withholding(
    model: ConfidenceModel,
    floor: float,
    withheld: int,
    best_withheld: float | None,
    served: Sequence[object],
) -> dict[str, Any]:
    """The metadata fields that say what the floor withheld (`QueryMetadata`): `withheld`
    of the candidates the answer would have shown without it, the best confidence of all
    it withheld."""
    shown = f"{floor:g}"
    if not served:
        message = NO_PRECEDENT.format(floor=shown)
    elif withheld:
        message = SOME_WITHHELD.format(count=withheld, floor=shown)
    else:
        message = None
    return {
        "confidence_model": model.name,
        "ranking": "confidence" if model.ranks else "fused",
        "min_confidence": floor,
        "withheld": withheld,
        "withheld_best_confidence": None if best_withheld is None else round(best_withheld, 4),
        "no_precedent": not served,
        "message": message,
    }
