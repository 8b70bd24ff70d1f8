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


Guard = Callable[[list[SigningKey]], None]


def add_person(
    path: Path, tenant_id: str, email: str, role: PersonRole, *, guard: Guard | None = None
) -> SigningKey:
    """The person with their own key (a new one); their role changed if they are in the
    keyring already with another (their key renewed too: what they signed in with ends);
    their key as it is if they hold that role already (adding twice changes nothing).

    `guard` sees the keys as they are under the file's lock, before the change, and
    refuses it by raising (the caller's own key no longer what it was: a removed or
    demoted admin's request in flight changes nothing)."""
    require_tenant(tenant_id)
    address = email.strip().lower()
    made = SigningKey(
        key_id=person_key_id(tenant_id, address),
        tenant_id=tenant_id,
        secret=new_secret(),
        roles=["admin"],
        person=address,
        person_role=role,
    )
    done: list[SigningKey] = []

    def change(keys: list[SigningKey]) -> list[SigningKey]:
        if guard is not None:
            guard(keys)
        held = _person(keys, tenant_id, address)
        if held is not None and held.person_role == role:
            done.append(held)
            return keys
        done.append(made)
        # the person's earlier key goes, whatever its id (one written by hand included)
        kept = [k for k in keys if k.key_id != made.key_id and k is not held]
        return [*kept, made]

    edit_keys(path, change)
    return done[0]


def _change_person(
    path: Path,
    tenant_id: str,
    email: str,
    change: Callable[[SigningKey], SigningKey | None],
    guard: Guard | None = None,
) -> SigningKey:
    """The person's key changed (or removed, when `change` answers None) in the file;
    answers the changed key, or the removed one."""
    done: list[SigningKey] = []

    def edit(keys: list[SigningKey]) -> list[SigningKey]:
        if guard is not None:
            guard(keys)
        found = _person(keys, tenant_id, email)
        if found is None:
            raise PersonNotFoundError(email, tenant_id)
        changed = change(found)
        done.append(changed or found)
        others = [k for k in keys if k.key_id != found.key_id]
        return others if changed is None else [*others, changed]

    edit_keys(path, edit)
    return done[0]


def renew_person(
    path: Path, tenant_id: str, email: str, *, guard: Guard | None = None
) -> SigningKey:
    """A new secret for the person's key: every link and session they had ends."""
    return _change_person(
        path,
        tenant_id,
        email,
        lambda key: key.model_copy(update={"secret": new_secret()}),
        guard,
    )


def remove_person(
    path: Path, tenant_id: str, email: str, *, guard: Guard | None = None
) -> SigningKey:
    """The person and their key out of the keyring: their next request is refused."""
    return _change_person(path, tenant_id, email, lambda key: None, guard)


def person(path: Path, tenant_id: str, email: str) -> SigningKey:
    found = _person(read_keys(path), tenant_id, email)
    if found is None:
        raise PersonNotFoundError(email, tenant_id)
    return found
