"""The people of the local keyring: added, listed, renewed and removed in the file.

Each change takes the keyring's lock file, reads the keyring, writes the new one beside it
and renames it into place: a running `grandbo serve` or `grandbo console` reads the new
file at its next request (`KeyringFile`), so a removal takes effect at once, and two
commands run together never lose each other's change.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grandbo.api.auth import Keyring, PersonRole, SigningKey, keyring_document, new_secret
from grandbo.api.people import person_key_id
from grandbo.errors import GrandboError
from grandbo.tenancy import require_tenant


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(path: Path) -> list[SigningKey]:
    if not path.exists():
        return []
    return Keyring.from_json(path.read_text()).signing_keys()


def _write(path: Path, keys: list[SigningKey]) -> None:
    staged = path.with_name(path.name + ".new")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(keyring_document(keys))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staged, path)


def _edit(path: Path, change: Callable[[list[SigningKey]], list[SigningKey]]) -> None:
    with _locked(path):
        _write(path, change(_read(path)))


def people(path: Path, tenant_id: str) -> list[SigningKey]:
    """The organization's people, by address."""
    return sorted(
        (key for key in _read(path) if key.tenant_id == tenant_id and key.person),
        key=lambda key: str(key.person),
    )


def services(path: Path, tenant_id: str) -> list[SigningKey]:
    """The organization's keys that stand for a service, not a person."""
    return [key for key in _read(path) if key.tenant_id == tenant_id and not key.person]


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

    _edit(path, change)
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
            raise GrandboError(f"no person {email} in organization {tenant_id}")
        changed = change(found)
        done.append(changed or found)
        others = [k for k in keys if k.key_id != found.key_id]
        return others if changed is None else [*others, changed]

    _edit(path, edit)
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
    found = _person(_read(path), tenant_id, email)
    if found is None:
        raise GrandboError(f"no person {email} in organization {tenant_id}")
    return found
