"""Rules every stored or queried text obeys, whatever the field."""

from __future__ import annotations

import unicodedata

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
