"""Rules every stored or queried text obeys, whatever the field."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

# C0/C1 controls except tab, newline, carriage return; NUL breaks PostgreSQL text.
_ALLOWED_CONTROLS = {"\t", "\n", "\r"}


def reject_unsafe_text(value: str) -> str:
    """Return `value` if PostgreSQL can store it faithfully, else raise ValueError."""
    for char in value:
        category = unicodedata.category(char)
        if category == "Cs":
            raise ValueError("contains a lone surrogate (invalid Unicode)")
        if category == "Cc" and char not in _ALLOWED_CONTROLS:
            raise ValueError(f"contains control character U+{ord(char):04X}")
    return value


def find_unsafe_json(value: Any, *, max_depth: int) -> tuple[str, str] | None:
    """The first place in a parsed JSON value that cannot be stored faithfully, or None.

    Returns (path, problem): a key or string breaking the text rules, a number that is
    not finite (NaN, Infinity: jsonb has neither), or nesting deeper than `max_depth`.
    Walked with an explicit stack, so a hostile depth costs no recursion.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                return path or "body", f"nests deeper than {max_depth} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str):
                    try:
                        reject_unsafe_text(key)
                    except ValueError as exc:
                        return _join(path, "<key>"), f"a key {exc}"
                    stack.append((child, _join(path, key), depth + 1))
                else:
                    stack.append((child, f"{path}[{key}]", depth + 1))
        elif isinstance(item, str):
            try:
                reject_unsafe_text(item)
            except ValueError as exc:
                return path or "body", str(exc)
        elif isinstance(item, float) and not math.isfinite(item):
            return path or "body", "must be a finite number (no NaN or Infinity)"
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# What a line shown to a model or a person must not carry: controls, surrogates, the
# bidirectional overrides and isolates (they reorder what is read), and the zero-width
# characters (they hide text between what is seen)
_UNSAFE_DISPLAY = re.compile(
    r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


def one_line(text: str) -> str:
    """`text` as one line of plain characters: every run of whitespace, line or paragraph
    separator and unsafe display character (above) is one space."""
    return " ".join(_UNSAFE_DISPLAY.sub(" ", text).split())


def quoted(text: str, limit: int | None = None) -> str:
    """Stored text as data in a line of ours: one line, cut to `limit` characters (ending
    "…"), written as a JSON string, so its own quotes are escaped and nothing it holds
    reads as our sentence (a hit line, a confidence, "no precedent")."""
    line = one_line(text)
    if limit is not None and len(line) > limit:
        line = line[: limit - 1] + "…"
    return json.dumps(line, ensure_ascii=False)


# What names a service, in an entry and in the topology: letters, digits and . _ : / -,
# starting with a letter or a digit (no spaces: a name is never a sentence)
MAX_SERVICE_CHARS = 120
SERVICE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
