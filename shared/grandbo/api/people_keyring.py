"""The people of the local keyring: added, listed, renewed and removed in the file
(`grandbo.api.keyring_file`: each change under the file's lock, the file replaced whole,
so a running `grandbo serve` or `grandbo console` reads it at its next request and a
removal takes effect at once)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grandbo.api.auth import PersonRole, SigningKey, new_secret
from grandbo.api.keyring_file import edit_keys, read_keys
from grandbo.api.people import person_key_id
from grandbo.errors import PersonNotFoundError
from grandbo.tenancy import require_tenant


def people(path: Path, tenant_id: str) -> list[SigningKey]:
    """The organization's people, by address."""
    return sorted(
        (key for key in read_keys(path) if key.tenant_id == tenant_id and key.person),
        key=lambda key: str(key.person),
    )


def services(path: Path, tenant_id: str) -> list[SigningKey]:
    """The organization's keys that stand for a service, not a person."""
    return [key for key in read_keys(path) if key.tenant_id == tenant_id and not key.person]


def _person(keys: list[SigningKey], tenant_id: str, email: str) -> SigningKey | None:
    return next(
        (k for k in keys if k.tenant_id == tenant_id and k.person == email.strip().lower()), None
    )


def add_person(path: Path, tenant_id: str, email: str, role: PersonRole) -> SigningKey:
    """The person with their own key (a new one), or their role changed if they are in the
    keyring already (their key renewed too: what they signed in with ends)."""
    require_tenant(tenant_id)
    key = SigningKey(
        key_id=person_key_id(tenant_id, email.strip().lower()),
        tenant_id=tenant_id,
        secret=new_secret(),
        roles=["admin"],
        person=email,
        person_role=role,
    )

    def change(keys: list[SigningKey]) -> list[SigningKey]:
        kept = [k for k in keys if k.key_id != key.key_id]
        return [*kept, key]

    edit_keys(path, change)
    return key


def _change_person(
    path: Path,
    tenant_id: str,
    email: str,
    change: Callable[[SigningKey], SigningKey | None],
) -> SigningKey:
    """The person's key changed (or removed, when `change` answers None) in the file;
    answers the changed key, or the removed one."""
    done: list[SigningKey] = []

    def edit(keys: list[SigningKey]) -> list[SigningKey]:
        found = _person(keys, tenant_id, email)
        if found is None:
            raise PersonNotFoundError(email, tenant_id)
        changed = change(found)
        done.append(changed or found)
        others = [k for k in keys if k.key_id != found.key_id]
        return others if changed is None else [*others, changed]

    edit_keys(path, edit)
    return done[0]


def renew_person(path: Path, tenant_id: str, email: str) -> SigningKey:
    """A new secret for the person's key: every link and session they had ends."""
    return _change_person(
        path, tenant_id, email, lambda key: key.model_copy(update={"secret": new_secret()})
    )


def remove_person(path: Path, tenant_id: str, email: str) -> SigningKey:
    """The person and their key out of the keyring: their next request is refused."""
    return _change_person(path, tenant_id, email, lambda key: None)


def person(path: Path, tenant_id: str, email: str) -> SigningKey:
    found = _person(read_keys(path), tenant_id, email)
    if found is None:
        raise PersonNotFoundError(email, tenant_id)
    return found
