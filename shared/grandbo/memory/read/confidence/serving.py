"""The floor: a hit under it is withheld, and the answer says so in its metadata and, when
nothing is left, in words an agent and a person read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grandbo.errors import InvalidInputError
from grandbo.memory.read.confidence.model import ConfidenceModel
from grandbo.memory.read.confidence.regime import Searched

# said only when the search looked everywhere it normally looks (`Searched.COMPLETE`)
NO_PRECEDENT = (
    "Memory holds nothing close to this topic: no past incident or lesson reached the "
    "confidence floor ({floor}). Investigate it as new."
)
SOME_WITHHELD = "{count} weaker candidate(s) under the confidence floor ({floor}) withheld."
# what a degraded search could not do, and what that means for the answer
KEYWORDS_ONLY = (
    "Meaning search was unavailable ({why}): these are keyword matches only, and a "
    "lesson worded differently would not be found."
)
KEYWORDS_ONLY_EMPTY = (
    "Meaning search was unavailable ({why}) and keyword search found nothing close. This "
    "is not evidence that memory holds no precedent: a lesson worded differently would "
    "not be found. Ask again once meaning search is back."
)
PARTIAL = (
    "{count} of {active} active entries have no vector of the current model yet (just "
    "written or imported, or the embed worker is behind): they were searched by keywords "
    "only."
)
PARTIAL_EMPTY = (
    " Nothing reached the confidence floor ({floor}), but a lesson among them worded "
    "differently would not be found: this is not evidence that memory holds no precedent."
)
NO_VECTORS_YET = "no active entry has a vector of the current model yet"


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


def degraded(
    regime: Searched,
    *,
    vector_error: str | None,
    active: int,
    without_vector: int,
    floor: float,
    served: bool,
) -> str | None:
    """In words, what a degraded search could not look at and what that means (None for a
    complete search)."""
    if regime is Searched.KEYWORDS_ONLY:
        why = vector_error or NO_VECTORS_YET
        return (KEYWORDS_ONLY if served else KEYWORDS_ONLY_EMPTY).format(why=why)
    if regime is Searched.PARTIAL:
        note = PARTIAL.format(count=without_vector, active=active)
        return note if served else note + PARTIAL_EMPTY.format(floor=f"{floor:g}")
    return None


def withholding(
    model: ConfidenceModel,
    floor: float,
    withheld: int,
    best_withheld: float | None,
    served: Sequence[object],
    *,
    regime: Searched = Searched.COMPLETE,
    degraded_note: str | None = None,
) -> dict[str, Any]:
    """The metadata fields that say what the floor withheld (`QueryMetadata`): `withheld`
    of the candidates the answer would have shown without it, the best confidence of all
    it withheld; and what the search could see (`regime`, `degraded_note`). "No
    precedent" is said only of a complete search."""
    shown = f"{floor:g}"
    complete = regime is Searched.COMPLETE
    parts = [] if degraded_note is None else [degraded_note]
    if not served and complete:
        parts.append(NO_PRECEDENT.format(floor=shown))
    elif withheld:
        parts.append(SOME_WITHHELD.format(count=withheld, floor=shown))
    return {
        "confidence_model": model.name,
        "ranking": "confidence" if model.ranks else "fused",
        "min_confidence": floor,
        "withheld": withheld,
        "withheld_best_confidence": None if best_withheld is None else round(best_withheld, 4),
        "no_precedent": not served and complete,
        "searched": regime.value,
        "degraded": degraded_note,
        "message": " ".join(parts) or None,
    }
