"""Idempotency keys that cannot collide: one namespace per writer, each part escaped.

A key is `namespace:part:part...` where every part has `%` written `%25` and `:` written
`%3A`, so the parts can be read back exactly and two different writes never share a key
(before, incident `INC-9:finding:x` / finding `y` and incident `INC-9` / finding
`x:finding:y` both became `incident:INC-9:finding:x:finding:y`). A caller's own key is
kept within what it names: an admin's under its signing key and operation, the CLI's
under its command and entry. A part without `:` or `%` is written as it is, so keys of
ordinary incident ids are the ones stored before; migration 0006 rewrote the rest.
"""

from __future__ import annotations

import enum

from grandbo.errors import InvalidInputError
from grandbo.text.rules import reject_unsafe_text

# What a caller may send as its own key (an Idempotency-Key header, `grandbo add
# --idempotency-key`); the stored key, escaped and namespaced, stays well under the
# column's limit.
MAX_CALLER_KEY_CHARS = 255


class KeySpace(enum.StrEnum):
    """Who minted the key: keys of different writers never meet."""

    INCIDENT = "incident"
    ADMIN = "admin"
    CLI = "cli"
    EVAL = "eval"
    DEMO = "demo"
    QUERY = "query"  # a query-token caller's feedback
    EXPIRY = "expiry"  # the sweeper retiring an expired episodic entry
    RECURRENCE = "recurrence"  # the embed worker merging a recurrence


def _escaped(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def idempotency_key(space: KeySpace, *parts: str) -> str:
    """The stored key for `parts` in `space`; distinct parts give distinct keys."""
    return ":".join([space.value, *(_escaped(part) for part in parts)])


def incident_finding_key(incident_id: str, finding_id: str) -> str:
    return idempotency_key(KeySpace.INCIDENT, incident_id, "finding", finding_id)


def incident_recalled_key(incident_id: str, entry_id: str) -> str:
    """The key of an incident's outcome on an entry its investigation recalled: one per
    incident and entry, so a redelivery records it once, whatever it says then."""
    return idempotency_key(KeySpace.INCIDENT, incident_id, "recalled", entry_id)


def caller_key(value: str, field: str = "Idempotency-Key") -> str:
    """A key a caller chose, checked: 1-255 characters, no control characters."""
    if not 1 <= len(value) <= MAX_CALLER_KEY_CHARS:
        raise InvalidInputError(field, f"must be 1 to {MAX_CALLER_KEY_CHARS} characters")
    try:
        return reject_unsafe_text(value)
    except ValueError as exc:
        raise InvalidInputError(field, str(exc)) from exc
