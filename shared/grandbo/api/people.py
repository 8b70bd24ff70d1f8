"""People of an organization: their roles, and their console sign-in links.

A person is a signing key of the keyring that names them (`SigningKey.person`) and their
role. The roles nest: a `viewer` reads, a `curator` also curates (create, correct, retire,
merge, split, promote, verdicts on pairs, repairs), an `admin` also redacts, purges,
changes settings, calibrates, imports and exports. A key that names no person stands for
a service (the incident pipeline, automation) and may do what an admin may.

A sign-in link carries `gbl1.{key_id}.{expiry}.{hmac}` signed with the person's own key:
it works again and again until it expires, until the person is removed from the keyring,
or until their key is renewed (`grandbo people revoke`), whichever comes first.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from grandbo.api.auth import Keyring, PersonRole, SigningKey
from grandbo.errors import AuthenticationError, ForbiddenError, GrandboError

ROLES: tuple[PersonRole, ...] = ("viewer", "curator", "admin")
LINK_PREFIX = "gbl1"
DEFAULT_LINK_DAYS = 7
MAX_LINK_DAYS = 90
_DIGITS = re.compile(r"^[0-9]{1,12}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def may(role: PersonRole, needed: PersonRole) -> bool:
    """Whether `role` includes what `needed` may do."""
    return ROLES.index(role) >= ROLES.index(needed)


def require_role(role: PersonRole, needed: PersonRole, action: str) -> None:
    """ForbiddenError (a 403 naming the role) unless `role` may do what `needed` may."""
    if not may(role, needed):
        raise ForbiddenError(role, needed, action)


def person_key_id(tenant_id: str, email: str) -> str:
    """The id of a person's key: stable per organization and address, and no address in it
    (a key id is logged with every request)."""
    digest = hashlib.sha256(f"{tenant_id}\n{email.lower()}".encode()).hexdigest()
    return f"person-{digest[:20]}"


def _link_mac(key: SigningKey, payload: str) -> str:
    return hmac.new(key.secret.encode(), f"link\n{payload}".encode(), hashlib.sha256).hexdigest()


def mint_sign_in_token(
    key: SigningKey, *, days: int = DEFAULT_LINK_DAYS, now: float | None = None
) -> str:
    """A person's console sign-in token, good for `days` (1..MAX_LINK_DAYS)."""
    if key.person is None:
        raise GrandboError(f"key {key.key_id} stands for a service, not a person")
    if not 1 <= days <= MAX_LINK_DAYS:
        raise GrandboError(f"a sign-in link lasts 1..{MAX_LINK_DAYS} days")
    expiry = int(time.time() if now is None else now) + days * 86400
    payload = f"{LINK_PREFIX}.{key.key_id}.{expiry}"
    return f"{payload}.{_link_mac(key, payload)}"


def is_sign_in_token(token: str) -> bool:
    return token.startswith(f"{LINK_PREFIX}.")


def verify_sign_in_token(keyring: Keyring, token: str, *, now: float | None = None) -> SigningKey:
    """The person's key a sign-in token proves, as the keyring holds it now; else
    AuthenticationError (malformed, expired, the person removed or their key renewed)."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != LINK_PREFIX:
        raise AuthenticationError("malformed sign-in link")
    _, key_id, expiry, signature = parts
    if not _DIGITS.fullmatch(expiry) or not _HEX64.fullmatch(signature):
        raise AuthenticationError("malformed sign-in link")
    key = keyring.find(key_id, "admin")
    if key.person is None:
        raise AuthenticationError("a sign-in link is a person's")
    if int(expiry) < (time.time() if now is None else now):
        raise AuthenticationError("sign-in link expired")
    if not hmac.compare_digest(_link_mac(key, f"{LINK_PREFIX}.{key_id}.{expiry}"), signature):
        raise AuthenticationError("sign-in link revoked or not this keyring's")
    return key


def still_holds(keyring: Keyring, key: SigningKey) -> bool:
    """Whether `key` is in the keyring as it was signed in with: a person removed, their
    key renewed or their role changed ends every session they had."""
    try:
        current = keyring.find(key.key_id, "admin")
    except AuthenticationError:
        return False
    return current == key


# The least role each admin route needs, by method and path template (a test holds this
# table to the admin API's routes: a route added without a role here is refused to every
# person but an admin). Reads are a viewer's; the curation of entries a curator's; what
# removes text for good, changes the organization, or moves all of it, an admin's.
ADMIN_ROUTE_ROLES: dict[tuple[str, str], PersonRole] = {
    ("GET", "/v1/admin/whoami"): "viewer",
    ("GET", "/v1/admin/health"): "viewer",
    ("GET", "/v1/admin/review"): "viewer",
    ("GET", "/v1/admin/entries/<entry_id>"): "viewer",
    ("GET", "/v1/admin/entries/<entry_id>/recurrences"): "viewer",
    ("GET", "/v1/admin/entries/<entry_id>/history"): "viewer",
    ("GET", "/v1/admin/settings"): "viewer",
    ("GET", "/v1/admin/growth"): "viewer",
    ("GET", "/v1/admin/duplicates"): "viewer",
    ("POST", "/v1/admin/topology/blast-radius"): "viewer",
    ("POST", "/v1/admin/topology/criticality"): "viewer",
    ("POST", "/v1/admin/topology/dependencies"): "viewer",
    ("POST", "/v1/admin/topology/nodes"): "viewer",
    ("POST", "/v1/admin/query"): "viewer",
    ("POST", "/v1/admin/explanation"): "viewer",
    ("POST", "/v1/admin/catalog"): "viewer",
    ("POST", "/v1/admin/retrievals"): "viewer",
    ("POST", "/v1/admin/retrievals/incidents"): "viewer",
    ("POST", "/v1/admin/retrievals/<retrieval_id>/removal"): "admin",
    ("POST", "/v1/admin/verdicts/<verdict_id>/removal"): "admin",
    ("POST", "/v1/admin/verdicts/<verdict_id>/note-removal"): "admin",
    ("POST", "/v1/admin/entries"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/corrections"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/retirement"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/promotion"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/split"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/merge-policy"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/merge"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/distinct"): "curator",
    ("POST", "/v1/admin/health/repair"): "curator",
    ("POST", "/v1/admin/entries/<entry_id>/redaction"): "admin",
    ("POST", "/v1/admin/calibration"): "admin",
    ("POST", "/v1/admin/settings"): "admin",
    ("POST", "/v1/admin/topology"): "admin",
    ("POST", "/v1/admin/purge"): "admin",
    ("POST", "/v1/admin/purge/confirmation"): "admin",
    ("POST", "/v1/admin/export"): "admin",
    ("POST", "/v1/admin/import"): "admin",
    ("GET", "/v1/admin/people"): "admin",
    ("POST", "/v1/admin/people"): "admin",
    ("POST", "/v1/admin/people/link"): "admin",
    ("POST", "/v1/admin/people/revocation"): "admin",
    ("POST", "/v1/admin/people/removal"): "admin",
}
_TEMPLATE_PART = re.compile(r"<[a-z_]+>")
_ROUTE_PATTERNS = [
    (method, re.compile("^" + _TEMPLATE_PART.sub("[^/]+", re.escape(path)) + "$"), role)
    for (method, path), role in ADMIN_ROUTE_ROLES.items()
]


def role_needed(method: str, path: str) -> PersonRole:
    """The least role an admin request needs (an admin's for a route the table lacks)."""
    for route_method, pattern, role in _ROUTE_PATTERNS:
        if route_method == method.upper() and pattern.match(path):
            return role
    return "admin"
