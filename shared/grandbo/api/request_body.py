"""What every JSON request body must be before any parser or model sees it.

One JSON object, at most MAX_JSON_DEPTH levels deep, with integers of at most
MAX_INT_DIGITS digits, finite numbers only (no NaN, Infinity or 1e999), and every key
and string obeying the text rules (no control characters, no lone surrogates). A body
that is not gets a 400 naming where it went wrong, never a parser's RecursionError,
ValueError or a database error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from grandbo.text.rules import find_unsafe_json

MAX_JSON_DEPTH = 32
MAX_INT_DIGITS = 32


@dataclass(frozen=True, slots=True)
class BodyProblem:
    field: str
    message: str

    def __str__(self) -> str:
        """The problem as every door words it: where, then what."""
        return f"{self.field}: {self.message}"


class _RefusedError(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _RefusedError(f"{name} is not a number JSON allows")


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _RefusedError(f"an integer has more than {MAX_INT_DIGITS} digits")
    return int(digits)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _RefusedError(f"{text[:20]} is not a finite number")
    return value


def _nests_deeper_than(text: str, limit: int) -> bool:
    """Bracket depth outside strings; cheap when the body has few brackets at all."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def parse_json_object(text: str, *, text_rules: bool = True) -> dict[str, Any] | BodyProblem:
    """The body as one JSON object, or the problem with it.

    `text_rules=False` leaves strings to the receiver's own validation (an EventBridge
    event: the incident handler names the finding, and skips what it never stores).
    """
    if _nests_deeper_than(text, MAX_JSON_DEPTH):
        return BodyProblem("body", f"nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(
            text,
            parse_constant=_no_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except _RefusedError as exc:
        return BodyProblem("body", str(exc))
    except ValueError as exc:  # JSONDecodeError: position only, never the content
        return BodyProblem("body", f"is not valid JSON ({exc})")
    if not isinstance(value, dict):
        return BodyProblem("body", f"must be one JSON object, not {_kind(value)}")
    if text_rules:
        unsafe = find_unsafe_json(value, max_depth=MAX_JSON_DEPTH)
        if unsafe is not None:
            return BodyProblem(*unsafe)
    return value
