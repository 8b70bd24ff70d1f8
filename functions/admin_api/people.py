"""The admin API's people routes: the organization's people listed, added with a role (or
their role changed), given a new sign-in link, their key renewed, removed (an admin's).

People are keys of the keyring (`grandbo.api.people`). Where this server reads its keys
from a file (the local gateway), these routes change it under the file's lock and the next
request of everyone reads the change (`grandbo.api.people_keyring`). A deployed stack reads
its keys from a secret its functions may not write, and its people from IAM Identity
Center's permission sets: there the list answers, and a change is refused with a 409 that
names where people are managed.

An admin changes everyone's place but their own: their role, key or removal is another
admin's to change (an organization is never left without the admin who would fix it).
"""

import json
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

import grandbo.api.people_keyring as people_keyring
from grandbo.api.admin_models import (
    PersonLinkRequest,
    PersonNameRequest,
    PersonRequest,
)
from grandbo.api.auth import Caller, Keyring, SigningKey
from grandbo.api.people import mint_sign_in_token, still_holds
from grandbo.errors import CallerChangedError, InvalidInputError, PeopleManagedElsewhereError
from grandbo.observability import logger
from grandbo.runtime.lambda_container import runtime

router = APIGatewayRouter()  # type: ignore[no-untyped-call]

MANAGED_HERE = "this server's keyring file: a change takes effect at everyone's next request"
MANAGED_ELSEWHERE = (
    "this stack's people are managed in IAM Identity Center (the permission sets the stack "
    "maps to an organization and role) and its keys in the keyring secret, both with a "
    "deployment (docs/OPERATIONS.md); this API lists them and changes neither"
)


def _caller() -> Caller:
    caller: Caller = router.context["caller"]
    return caller


def _writable() -> Path:
    """The keyring file this server may change, or the 409 naming where people are."""
    path = runtime().people_file()
    if path is None:
        raise PeopleManagedElsewhereError(MANAGED_ELSEWHERE)
    return path


def _still_admin(caller: Caller) -> people_keyring.Guard:
    """A check of the keys under the file's lock: the caller's key is still there, still
    an admin's, with the secret this request was read with (not removed, demoted or
    renewed by another admin's change that landed first), so two admins demoting each
    other at once leave one."""
    seen = runtime().keyring().find(caller.key_id, "admin")

    def guard(keys: list[SigningKey]) -> None:
        if Caller.of(seen).role != "admin" or not still_holds(Keyring(keys), seen):
            raise CallerChangedError

    return guard


def _not_yourself(caller: Caller, email: str, change: str) -> None:
    if caller.person is not None and caller.person == email:
        raise InvalidInputError(
            "email",
            f"is you: another admin {change} (you would lose the session you ask with)",
        )


def _person(key: SigningKey, caller: Caller) -> dict[str, Any]:
    return {
        "email": key.person,
        "role": key.person_role,
        "key_id": key.key_id,
        "you": key.person == caller.person,
    }


def _with_link(key: SigningKey, caller: Caller, days: int) -> dict[str, Any]:
    return {
        "person": _person(key, caller),
        "sign_in_token": mint_sign_in_token(key, days=days),
        "link_days": days,
    }


@router.get("/v1/admin/people")
def list_people() -> dict[str, Any]:
    """The organization's people (address, role, key id), its service keys, and the IAM
    Identity Center permission sets the stack maps to it; `managed_here` says whether the
    other people routes may change them, `managed_by` where they are managed."""
    caller = _caller()
    keys = [k for k in runtime().keyring().signing_keys() if k.tenant_id == caller.tenant_id]
    people = sorted((k for k in keys if k.person), key=lambda k: str(k.person))
    sets = [
        {"permission_set": access.permission_set, "role": access.role}
        for access in runtime().iam_people().permission_sets
        if access.tenant_id == caller.tenant_id
    ]
    managed_here = runtime().people_file() is not None
    return {
        "organization": caller.tenant_id,
        "managed_here": managed_here,
        "managed_by": MANAGED_HERE if managed_here else MANAGED_ELSEWHERE,
        "people": [_person(k, caller) for k in people],
        "services": [
            {"key_id": k.key_id, "roles": k.roles, "stands_for": k.stands_for}
            for k in keys
            if not k.person
        ],
        "permission_sets": sets,
    }


@router.post("/v1/admin/people")
def add_person(request: PersonRequest) -> Response[Any]:
    """The person added with their role (201), or their role changed (200; their key is
    renewed, so what they signed in with ends), or kept as they are when they hold that
    role already (200: a resent form changes nothing); with a sign-in token."""
    caller = _caller()
    path = _writable()
    _not_yourself(caller, request.email, "changes your own role")
    known = {k.person for k in people_keyring.people(path, caller.tenant_id)}
    key = people_keyring.add_person(
        path, caller.tenant_id, request.email, request.role, guard=_still_admin(caller)
    )
    # key ids only: an address is never logged (every line names the caller's key id)
    logger.info(
        "person added" if request.email not in known else "person's role set",
        extra={"person_key_id": key.key_id, "role": key.person_role},
    )
    return Response(
        status_code=200 if request.email in known else 201,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(_with_link(key, caller, request.link_days)),
    )


@router.post("/v1/admin/people/link")
def link_person(request: PersonLinkRequest) -> dict[str, Any]:
    """A new console sign-in token for the person (their earlier links keep working until
    they expire or the person's key is renewed)."""
    caller = _caller()
    key = people_keyring.person(_writable(), caller.tenant_id, request.email)
    return _with_link(key, caller, request.link_days)


@router.post("/v1/admin/people/revocation")
def revoke_person(request: PersonNameRequest) -> dict[str, Any]:
    """The person's key renewed: every link and console session they had ends."""
    caller = _caller()
    path = _writable()
    _not_yourself(caller, request.email, "renews your own key")
    key = people_keyring.renew_person(
        path, caller.tenant_id, request.email, guard=_still_admin(caller)
    )
    logger.info("person's key renewed", extra={"person_key_id": key.key_id})
    return {"person": _person(key, caller), "revoked": True}


@router.post("/v1/admin/people/removal")
def remove_person(request: PersonNameRequest) -> dict[str, Any]:
    """The person out of the keyring: their next request, and their sessions, are refused."""
    caller = _caller()
    path = _writable()
    _not_yourself(caller, request.email, "removes you")
    key = people_keyring.remove_person(
        path, caller.tenant_id, request.email, guard=_still_admin(caller)
    )
    logger.info("person removed", extra={"person_key_id": key.key_id})
    return {"person": _person(key, caller), "removed": True}
