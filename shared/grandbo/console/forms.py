"""The console's form values, read and checked: each bad value a ConsoleError naming its
field (a 400 page), never an exception of the console."""

from __future__ import annotations

import re
import secrets
from uuid import UUID

from starlette.datastructures import FormData
from starlette.responses import RedirectResponse


class ConsoleError(Exception):
    """A request the console refuses itself (a bad form value), as a page."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def redirect_done(path: str, what: str) -> RedirectResponse:
    separator = "&" if "?" in path else "?"
    return RedirectResponse(f"{path}{separator}done={what}", status_code=303)


def text_of(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def tags_of(form: FormData) -> list[str]:
    return [tag.strip() for tag in text_of(form, "tags").split(",") if tag.strip()]


# the keys the console's own forms carry (secrets.token_hex): anything else is refused,
# never sent on as a header (a line break in it would end the request's headers)
_FORM_KEY = re.compile(r"[0-9a-f]{8,64}")
# what `int` takes, without the other scripts' digits, `_` separators or inner spaces
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,32}")
# a plain decimal (0, 0.05, .5, 1.0): no exponent, sign, NaN or other scripts' digits
_DECIMAL = re.compile(r"[0-9]{1,3}(\.[0-9]{0,12})?|\.[0-9]{1,12}")


def form_key_of(form: FormData) -> str:
    """The Idempotency-Key of the form shown (a fresh one for a form without it)."""
    key = text_of(form, "idempotency_key") or secrets.token_hex(16)
    if not _FORM_KEY.fullmatch(key):
        raise ConsoleError(
            400, "the form's idempotency key is not one it was given", "idempotency_key"
        )
    return f"console:{key}"


def whole_number(value: object, field: str, default: int | None = None) -> int:
    if value in (None, "") and default is not None:
        return default
    text = str(value).strip()
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ConsoleError(400, f"{field} must be a whole number", field)
    return int(text)


def probability(value: object) -> float:
    """A floor typed in the form: a decimal number from 0 to 1."""
    text = str(value or "").strip()
    if not _DECIMAL.fullmatch(text) or not 0.0 <= float(text) <= 1.0:
        raise ConsoleError(400, "min_confidence must be a number from 0 to 1", "min_confidence")
    return float(text)


def entry_id_of(value: str, field: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        raise ConsoleError(400, f"{field} must be an entry id (a UUID)", field) from None


def entry_pair_of(value: str, field: str) -> tuple[UUID, UUID]:
    """Two entry ids written `FIRST:SECOND` (a pair the review page offers)."""
    first, _, second = value.partition(":")
    return entry_id_of(first, field), entry_id_of(second, field)
