"""The smoke check's own organization, `grandbo-smoke`: what the check writes lands there
and nowhere else. On a stage its keys are the operator's (docs/OPERATIONS.md, step 8);
to a local runner they are lent for one run, written into the runner's keyring file
(which it reads again at its next request) and taken out when the run ends, after the run
has purged the organization: a local store keeps nothing of a smoke check."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from grandbo.api.auth import Role, SigningKey, new_secret
from grandbo.api.keyring_file import edit_keys
from grandbo.errors import GrandboError

SMOKE_TENANT = "grandbo-smoke"
# the ids of the keys lent for a run: a run that died before taking them back leaves
# them, and the next run's replace them
LENT_KEY_IDS: dict[Role, str] = {"admin": f"{SMOKE_TENANT}-admin", "query": f"{SMOKE_TENANT}-query"}
LENT_FOR = "grandbo smoke --local, for one run (taken back when it ends)"


def _lent(role: Role) -> SigningKey:
    return SigningKey(
        key_id=LENT_KEY_IDS[role],
        tenant_id=SMOKE_TENANT,
        secret=new_secret(),
        roles=[role],
        stands_for=LENT_FOR,
    )


def lent(key: SigningKey) -> bool:
    """Whether a key is one a smoke run lends (not the organization's own)."""
    return key.key_id in LENT_KEY_IDS.values() and key.stands_for == LENT_FOR


def _without_lent(keys: list[SigningKey]) -> list[SigningKey]:
    return [key for key in keys if key.key_id not in LENT_KEY_IDS.values()]


def hold_run_lock(data_dir: Path) -> IO[bytes]:
    """One smoke run at a time on a data directory (two lent each other's keys away and
    both failed, leaving their entries): the lock, held until the file is closed;
    SmokeTargetError-worthy OSError when another run holds it."""
    handle = (data_dir / "smoke.lock").open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise RunInProgressError(
            f"another grandbo smoke --local is running on {data_dir}: wait for it to end"
        ) from None
    return handle


class RunInProgressError(GrandboError):
    """Another smoke run holds this data directory's lock."""


def lend_keys(keyring_file: Path) -> tuple[SigningKey, SigningKey]:
    """New (admin, query) keys of the smoke organization, written into `keyring_file`."""
    admin, query = _lent("admin"), _lent("query")
    edit_keys(keyring_file, lambda keys: [*_without_lent(keys), admin, query])
    return admin, query


def take_back_keys(keyring_file: Path) -> None:
    """The lent keys out of `keyring_file` again (nothing when there are none)."""
    if keyring_file.exists():
        edit_keys(keyring_file, _without_lent)
