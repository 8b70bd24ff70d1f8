"""Domain errors. Each maps to one HTTP status in the handlers; none is matched by message."""

from __future__ import annotations

from pydantic import ValidationError


class GrandboError(Exception):
    """Base of every error Grandbo raises on purpose."""


class InvalidInputError(GrandboError):
    """A caller sent something Grandbo will not store or answer (maps to 4xx).

    `field` names the offending input so an API can point at it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def invalid_input_from(exc: ValidationError) -> InvalidInputError:
    """The first problem pydantic found, as an error naming its field (dotted path)."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "body"
    return InvalidInputError(field, error["msg"])


class InvalidTopicError(InvalidInputError):
    """The topic is a slug or a title, not a sentence describing what was found."""

    def __init__(self, message: str) -> None:
        super().__init__("topic", message)


class EntryNotFoundError(GrandboError):
    """No entry with that id exists for this tenant (another tenant's entry included)."""

    def __init__(self, entry_id: object) -> None:
        super().__init__(f"memory entry {entry_id} not found")
        self.entry_id = entry_id


class RetrievalNotFoundError(GrandboError):
    """No logged question with that id exists for this tenant (maps to 404)."""

    def __init__(self, retrieval_id: object) -> None:
        super().__init__(f"logged question {retrieval_id} not found")
        self.retrieval_id = retrieval_id


class VerdictNotFoundError(GrandboError):
    """No verdict with that id exists for this tenant (maps to 404)."""

    def __init__(self, verdict_id: object) -> None:
        super().__init__(f"verdict {verdict_id} not found")
        self.verdict_id = verdict_id


class PersonNotFoundError(GrandboError):
    """No person with that address in this organization's keyring (maps to 404)."""

    def __init__(self, email: str, tenant_id: str) -> None:
        super().__init__(f"no person {email} in organization {tenant_id}")
        self.email = email


class KeyringUnreadableError(GrandboError):
    """The keyring file a change would edit is not a keyring now (maps to 409): nothing
    is changed over it."""


class PeopleManagedElsewhereError(GrandboError):
    """This server reads its people from where it may not write them (a deployed stack's
    keyring secret and IAM Identity Center): maps to 409, naming where they are managed."""


class RevisionConflictError(GrandboError):
    """A correction named an expected revision that is no longer current."""

    def __init__(self, entry_id: object, expected: int, actual: int) -> None:
        super().__init__(
            f"memory entry {entry_id} is at revision {actual}, not {expected}; "
            "re-read it and correct the current text"
        )
        self.expected = expected
        self.actual = actual


class EntryNotActiveError(GrandboError):
    """The entry is retired or superseded and cannot be corrected or retired again."""

    def __init__(self, entry_id: object, status: str) -> None:
        super().__init__(f"memory entry {entry_id} is {status}")
        self.status = status


class MergeRefusedError(GrandboError):
    """An admin's merge of two entries that the rule for recurrences forbids."""

    def __init__(self, entry_id: object, into: object, reason: str) -> None:
        super().__init__(f"memory entry {entry_id} cannot be merged into {into}: {reason}")
        self.reason = reason


class NotARecurrenceError(GrandboError):
    """A split asked of an entry that is not merged into another."""

    def __init__(self, entry_id: object, status: str) -> None:
        super().__init__(
            f"memory entry {entry_id} is {status}, not a recurrence merged into another entry"
        )
        self.status = status


class EmbeddingError(GrandboError):
    """A provider could not produce a valid 1024-dimension embedding."""


class MigrationError(GrandboError):
    """The schema cannot be brought to the expected version safely."""


class ProjectionMismatchError(GrandboError):
    """Replaying the events does not reproduce the live projection."""


# The reason of the one AuthenticationError a caller is told about: a signed request
# whose signature held, sent again
REPLAYED = "nonce replayed"
REPLAYED_MESSAGE = (
    "this signed request was already used (each signature is good once): sign it again, "
    "with a new nonce"
)


class AuthenticationError(GrandboError):
    """A request's signature or token is missing, malformed, expired, replayed or wrong.

    Maps to 401. `reason` is for logs; callers get one generic message so a probe learns
    nothing about which check failed.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ForbiddenError(GrandboError):
    """An authenticated person whose role may not do what they asked (maps to 403)."""

    def __init__(self, role: str, needed: str, action: str) -> None:
        super().__init__(f"role {role} may not {action}: it needs the {needed} role")
        self.role = role
        self.needed = needed


class CallerChangedError(ForbiddenError):
    """The caller's key was removed, renewed or demoted by a change that landed while
    their request waited (maps to 403): their change is not made."""

    def __init__(self) -> None:
        GrandboError.__init__(
            self,
            "your key or role changed while this request waited (another admin's change "
            "landed first): nothing was changed",
        )
        self.role = "changed"
        self.needed = "admin"


class InvalidEventError(GrandboError):
    """An incoming event (EventBridge, SQS) does not match its schema; it is not retried."""


class EnqueueError(GrandboError):
    """The embed queue refused a job; the write stands and the sweeper will catch up."""


class StoreUnavailableError(GrandboError):
    """The database cannot be reached or dropped the connection (maps to 503; retry)."""


class RateLimitedError(GrandboError):
    """A caller sent more of a kind of write than its window allows (maps to 429)."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = max(1, retry_after_s)


class EntryRedactedError(GrandboError):
    """The entry's text was removed for good (maps to 410 with its tombstone)."""

    def __init__(self, entry_id: object, tombstone: dict[str, object]) -> None:
        super().__init__(f"entry {entry_id} was redacted")
        self.entry_id = entry_id
        self.tombstone = tombstone


def interrupted(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among `exc`'s causes or contexts: a Ctrl-C inside an
    import re-raised as that import's own error (numpy's ImportError, pydantic's
    SchemaError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
