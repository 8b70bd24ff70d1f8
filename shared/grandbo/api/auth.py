"""Who is calling: tenant-bound signing keys, signed admin requests, Beacon query tokens.

Every key belongs to exactly one tenant, so a valid signature or token *is* the tenant;
nothing in a request body can choose it. Several keys may be active at once (rotation:
add the new key, move callers, remove the old one).

Admin requests carry four headers and an HMAC-SHA256 over

    "{timestamp}\\n{nonce}\\n{METHOD}\\n{path}\\n{sha256(raw body) hex}"

accepted for five minutes either side of the server clock, once per nonce. Beacon and
other readers send `Authorization: Bearer gbq1.{key_id}.{expiry}.{hmac hex}`, checked by
the API Gateway authorizer before the query Lambda runs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from grandbo.errors import REPLAYED, AuthenticationError, GrandboError
from grandbo.tenancy import require_tenant

_log = logging.getLogger(__name__)

SIGNATURE_WINDOW_S = 300
MAX_TOKEN_LIFETIME_S = 24 * 3600
TOKEN_PREFIX = "gbq1"  # noqa: S105 - a format tag, not a secret

HEADER_KEY_ID = "x-grandbo-key-id"
HEADER_TIMESTAMP = "x-grandbo-timestamp"
HEADER_NONCE = "x-grandbo-nonce"
HEADER_SIGNATURE = "x-grandbo-signature"
HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"  # signed too

_NONCE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_DIGITS = re.compile(r"^[0-9]{1,12}$")

Role = Literal["admin", "query"]
# what a person may do through the admin API (grandbo.api.people): each role may also do
# everything of the roles before it
PersonRole = Literal["viewer", "curator", "admin"]
# a person's e-mail address, as the keyring and every event's actor (`person:EMAIL`) hold it
_EMAIL = r"^[a-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@[a-z0-9.-]{1,253}\.[a-z0-9-]{2,63}$"
Email = Annotated[
    str,
    BeforeValidator(lambda value: value.strip().lower() if isinstance(value, str) else value),
    StringConstraints(pattern=_EMAIL, max_length=320),
]


class SigningKey(BaseModel):
    """One shared secret, bound to one tenant and the roles it may act in."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    tenant_id: str
    secret: Annotated[str, StringConstraints(min_length=32)]
    roles: list[Role] = Field(min_length=1)
    # a person's own key (`grandbo people add`): whom it stands for, and what they may do;
    # a key without a person stands for a service (the incident pipeline, automation)
    person: Email | None = None
    person_role: PersonRole | None = None
    # what a service key is for, in words (shown by `grandbo people list`)
    stands_for: Annotated[str, StringConstraints(max_length=200)] | None = None

    @model_validator(mode="after")
    def _person_whole(self) -> SigningKey:
        if (self.person is None) != (self.person_role is None):
            raise ValueError("a person's key names both the person and their role")
        if self.person is not None and self.roles != ["admin"]:
            raise ValueError("a person's key signs admin requests only (roles: [admin])")
        return self

    @property
    def actor(self) -> str:
        """Who the events this key writes name: `person:EMAIL`, or `admin:KEY_ID`."""
        return f"person:{self.person}" if self.person else f"admin:{self.key_id}"

    def __repr__(self) -> str:  # never print a secret
        return f"SigningKey(key_id={self.key_id!r}, tenant_id={self.tenant_id!r})"


class _KeyringDocument(BaseModel):
    keys: list[SigningKey]


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: the tenant its key is bound to, which key it used, and the
    person the key stands for (None: a service, which may do what an admin may)."""

    tenant_id: str
    key_id: str
    person: str | None = None
    person_role: PersonRole | None = None
    # how the caller proved who it is: a signing key's HMAC, or AWS's signature (SigV4,
    # verified by API Gateway: grandbo.api.iam_people)
    via: Literal["key", "iam"] = "key"

    @classmethod
    def of(cls, key: SigningKey) -> Caller:
        return cls(key.tenant_id, key.key_id, key.person, key.person_role)

    @property
    def actor(self) -> str:
        return f"person:{self.person}" if self.person else f"admin:{self.key_id}"

    @property
    def role(self) -> PersonRole:
        return self.person_role or "admin"


class Keyring:
    """The active signing keys, by key id."""

    def __init__(self, keys: list[SigningKey]) -> None:
        for key in keys:
            require_tenant(key.tenant_id)
        self._keys = {key.key_id: key for key in keys}
        if len(self._keys) != len(keys):
            raise GrandboError("the keyring lists a key id twice")
        people = [(key.tenant_id, key.person) for key in keys if key.person]
        if len(set(people)) != len(people):
            raise GrandboError("the keyring lists a person of an organization twice")

    @classmethod
    def from_json(cls, document: str) -> Keyring:
        try:
            return cls(_KeyringDocument.model_validate_json(document).keys)
        except ValidationError as exc:
            # where and what only: pydantic's own message quotes the input, which is a key
            # with its secret (a malformed file's warning would log half of it)
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'document'}: {error['msg']}"
                for error in exc.errors(include_url=False, include_input=False)
            )
            raise GrandboError(f"the keyring document is malformed: {problems}") from None

    def signing_keys(self) -> list[SigningKey]:
        """Every key, in the document's order."""
        return list(self._keys.values())

    def find(self, key_id: str, role: Role) -> SigningKey:
        key = self._keys.get(key_id)
        if key is None or role not in key.roles:
            raise AuthenticationError(f"unknown key id or key not allowed to {role}")
        return key


class KeyringFile:
    """A keyring file, read again whenever it changes (its inode, size, modification or
    change time): a key removed from it stops authenticating at the next request. A file
    that cannot be parsed (an editor half way through writing it) leaves the last good
    keys in force until it can be; with no good keys at all, or no file, every request is
    refused (AuthenticationError, a 401), never an error of the service."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._keyring: Keyring | None = None
        self._version: tuple[int, int, int, int] | None = None

    def current(self) -> Keyring:
        try:
            seen = os.stat(self.path)
        except OSError as exc:
            raise AuthenticationError(f"no keyring file: {exc.strerror}") from exc
        version = (seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)
        with self._lock:
            if self._keyring is None or version != self._version:
                try:
                    with open(self.path, encoding="utf-8") as handle:
                        keyring = Keyring.from_json(handle.read())
                except (OSError, UnicodeDecodeError, GrandboError) as exc:
                    if self._keyring is None:
                        raise AuthenticationError("the keyring file is unreadable") from exc
                    _log.warning("keyring file unreadable, the last good keys serve: %s", exc)
                    return self._keyring  # read again at the next request
                self._keyring, self._version = keyring, version
            return self._keyring


def new_secret() -> str:
    return secrets.token_urlsafe(48)


def _mac(secret: str, message: str) -> str:
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


def string_to_sign(
    timestamp: str, nonce: str, method: str, path: str, body: bytes, idempotency_key: str = ""
) -> str:
    """What an admin signature covers: every part of the request that changes its effect.

    `{timestamp}\n{nonce}\n{METHOD}\n{path}\n{sha256(body) hex}\n{Idempotency-Key or ""}`
    (the key last: a header value holds no newline, so the string reads back one way).
    """
    digest = hashlib.sha256(body).hexdigest()
    return f"{timestamp}\n{nonce}\n{method.upper()}\n{path}\n{digest}\n{idempotency_key}"


def sign_admin_request(
    key: SigningKey,
    method: str,
    path: str,
    body: bytes,
    *,
    now: float | None = None,
    nonce: str | None = None,
    idempotency_key: str | None = None,
) -> dict[str, str]:
    """The headers that authenticate one admin request (its Idempotency-Key included)."""
    timestamp = str(int(time.time() if now is None else now))
    nonce = nonce or secrets.token_urlsafe(24)
    signature = _mac(
        key.secret,
        string_to_sign(timestamp, nonce, method, path, body, idempotency_key or ""),
    )
    headers = {
        HEADER_KEY_ID: key.key_id,
        HEADER_TIMESTAMP: timestamp,
        HEADER_NONCE: nonce,
        HEADER_SIGNATURE: signature,
    }
    if idempotency_key:
        headers[HEADER_IDEMPOTENCY_KEY] = idempotency_key
    return headers


def verify_admin_request(
    keyring: Keyring,
    headers: Mapping[str, str],
    method: str,
    path: str,
    body: bytes,
    claim_nonce: Callable[[Caller, str], bool],
    *,
    now: float | None = None,
) -> Caller:
    """Return the caller a signed admin request proves, or raise AuthenticationError.

    `claim_nonce(caller, nonce)` records the nonce and returns False if it was seen
    before; it is called only once the signature is valid, so unauthenticated traffic
    cannot fill the nonce store.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    missing = [
        h
        for h in (HEADER_KEY_ID, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE)
        if not lowered.get(h)
    ]
    if missing:
        raise AuthenticationError(f"missing header(s): {', '.join(missing)}")
    key_id, timestamp = lowered[HEADER_KEY_ID], lowered[HEADER_TIMESTAMP]
    nonce, signature = lowered[HEADER_NONCE], lowered[HEADER_SIGNATURE]
    if not _DIGITS.fullmatch(timestamp):
        raise AuthenticationError("timestamp is not unix seconds")
    if not _NONCE.fullmatch(nonce):
        raise AuthenticationError("nonce must be 16-128 characters of [A-Za-z0-9_-]")
    if not _HEX64.fullmatch(signature):
        raise AuthenticationError("signature is not 64 lower-case hex characters")
    key = keyring.find(key_id, "admin")
    clock = time.time() if now is None else now
    if abs(clock - int(timestamp)) > SIGNATURE_WINDOW_S:
        raise AuthenticationError("timestamp outside the 5-minute window")
    idempotency_key = lowered.get(HEADER_IDEMPOTENCY_KEY.lower(), "")
    expected = _mac(
        key.secret, string_to_sign(timestamp, nonce, method, path, body, idempotency_key)
    )
    if not hmac.compare_digest(expected, signature):
        raise AuthenticationError("signature mismatch")
    caller = Caller.of(key)
    if not claim_nonce(caller, nonce):
        raise AuthenticationError(REPLAYED)
    return caller


def mint_query_token(key: SigningKey, *, ttl_s: int = 3600, now: float | None = None) -> str:
    """A bearer token for the query API, bound to the key's tenant, valid for `ttl_s`."""
    if not 1 <= ttl_s <= MAX_TOKEN_LIFETIME_S:
        raise GrandboError(f"token lifetime must be 1..{MAX_TOKEN_LIFETIME_S} seconds")
    expiry = int(time.time() if now is None else now) + ttl_s
    payload = f"{TOKEN_PREFIX}.{key.key_id}.{expiry}"
    return f"{payload}.{_mac(key.secret, payload)}"


def verify_query_token(
    keyring: Keyring, authorization: str | None, *, now: float | None = None
) -> Caller:
    """The caller a `Bearer gbq1...` header proves, or AuthenticationError."""
    if not authorization:
        raise AuthenticationError("missing Authorization header")
    scheme, _, token = authorization.partition(" ")
    token = token.lstrip(" ")
    # the scheme in any case (RFC 9110), then the token, nothing after it: every spelling
    # of one token is one counter at the edge (the WAF lowercases the header and compresses
    # its spaces: infra/waf.py), so no variant earns a caller a second one
    if scheme.lower() != "bearer" or not token or token != token.strip():
        raise AuthenticationError("Authorization must be 'Bearer <token>'")
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != TOKEN_PREFIX:
        raise AuthenticationError("malformed token")
    _, key_id, expiry, signature = parts
    if not _DIGITS.fullmatch(expiry) or not _HEX64.fullmatch(signature):
        raise AuthenticationError("malformed token")
    key = keyring.find(key_id, "query")
    clock = time.time() if now is None else now
    if int(expiry) < clock:
        raise AuthenticationError("token expired")
    if int(expiry) - clock > MAX_TOKEN_LIFETIME_S + SIGNATURE_WINDOW_S:
        raise AuthenticationError("token lifetime too long")
    expected = _mac(key.secret, f"{TOKEN_PREFIX}.{key_id}.{expiry}")
    if not hmac.compare_digest(expected, signature):
        raise AuthenticationError("signature mismatch")
    return Caller(tenant_id=key.tenant_id, key_id=key.key_id)


PURGE_PREFIX = "gbp1"
# how long an organization's purge, once requested, may be confirmed
PURGE_CONFIRMATION_S = 600


def mint_purge_confirmation(key: SigningKey, rows_digest: str, *, now: float | None = None) -> str:
    """The token that confirms a purge of the key's organization as it stands now
    (`rows_digest`: what the request showed would be deleted): valid PURGE_CONFIRMATION_S,
    only in a request signed by the same key, and only while the organization is still
    what it was (after a purge, or any write, the token is spent)."""
    expiry = int(time.time() if now is None else now) + PURGE_CONFIRMATION_S
    payload = f"{PURGE_PREFIX}.{key.tenant_id}.{key.key_id}.{expiry}.{rows_digest}"
    return f"{PURGE_PREFIX}.{expiry}.{_mac(key.secret, payload)}"


def verify_purge_confirmation(
    key: SigningKey, token: object, rows_digest: str, *, now: float | None = None
) -> None:
    """AuthenticationError unless `token` is this key's purge confirmation, in time, for
    the organization as it still stands (`rows_digest`)."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3 or parts[0] != PURGE_PREFIX or not _DIGITS.fullmatch(parts[1]):
        raise AuthenticationError("malformed purge confirmation")
    expiry, signature = int(parts[1]), parts[2]
    if expiry < (time.time() if now is None else now):
        raise AuthenticationError("purge confirmation expired")
    payload = f"{PURGE_PREFIX}.{key.tenant_id}.{key.key_id}.{expiry}.{rows_digest}"
    if not hmac.compare_digest(_mac(key.secret, payload), signature):
        raise AuthenticationError(
            "purge confirmation not this key's, or the organization changed since it was requested"
        )


# Tables a purge empties whose rows a live organization adds to without changing what it
# holds: the retrieval log (and its per-day counts, its callers' per-day counts, migration
# 0038, and their per-minute counts) grows with every query its agents ask, and a purge
# requested while they ask must still be confirmable.
UNDIGESTED_TABLES = frozenset(
    {
        "org_memory_retrievals",
        "org_memory_retrieval_spellings",  # one per logged question (0040)
        "org_memory_retrieval_days",
        "org_memory_retrieval_caller_days",
        "org_memory_query_minutes",
    }
)


def rows_digest(rows: dict[str, int], last_event_id: int) -> str:
    """A digest of an organization as a purge request showed it: its rows per table (but
    UNDIGESTED_TABLES) and its latest event (ids are never reused: any write since, a
    purge included, moves it)."""
    kept = {table: n for table, n in rows.items() if table not in UNDIGESTED_TABLES}
    state = {"rows": kept, "last_event_id": last_event_id}
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def keyring_document(keys: list[SigningKey]) -> str:
    return json.dumps({"keys": [key.model_dump() for key in keys]}, indent=2)
