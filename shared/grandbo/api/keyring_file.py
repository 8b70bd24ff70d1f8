"""The local keyring file, read and changed whole: each change takes the file's lock,
reads the keys, writes the new document beside it and renames it into place, so a running
`grandbo serve` or `grandbo console` reads the new file at its next request
(`KeyringFile`) and two commands run together never lose each other's change."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grandbo.api.auth import Keyring, SigningKey, keyring_document
from grandbo.errors import GrandboError, KeyringUnreadableError


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_keys(path: Path) -> list[SigningKey]:
    """The file's keys, in its order; none when there is no file yet. A file that is not a
    keyring (an editor half way through saving it) is KeyringUnreadableError: nothing is
    changed over it."""
    if not path.exists():
        return []
    try:
        return Keyring.from_json(path.read_text()).signing_keys()
    except (GrandboError, OSError, UnicodeDecodeError) as exc:
        raise KeyringUnreadableError(
            f"the keyring file {path.name} cannot be read ({exc}); fix it, then try again: "
            "nothing was changed"
        ) from exc


def _write(path: Path, keys: list[SigningKey]) -> None:
    staged = path.with_name(path.name + ".new")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(keyring_document(keys))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staged, path)


def edit_keys(path: Path, change: Callable[[list[SigningKey]], list[SigningKey]]) -> None:
    """The file's keys replaced by `change(keys)`, under the lock (the file made if none)."""
    with _locked(path):
        changed = change(read_keys(path))
        Keyring(changed)  # a document that would not read back is never written
        _write(path, changed)


def keyring_organizations(path: Path) -> set[str]:
    """The organizations the file holds a key of."""
    return {key.tenant_id for key in read_keys(path)}
