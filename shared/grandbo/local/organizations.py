"""Which organizations exist, as every command that takes `--tenant` sees them, and the
refusal of one that does not.

An organization exists when the store's registry names it (`org_memory_tenants`: it has
memory, from an entry, an incident, an import or a question asked of it) or the local
keyring holds a key of it (it was onboarded: `grandbo serve`'s demo keys, `grandbo people
add --create-tenant`). A purge takes it out of the registry; keys left in the keyring
keep it onboarded. A command never makes one by being given a name it does not know: the
commands that can make one (`grandbo add`, `grandbo import`, `grandbo people add`) do so
only with `--create-tenant`, and the others refuse, naming the organizations that exist.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from pathlib import Path

from grandbo.api.keyring_file import keyring_organizations
from grandbo.errors import GrandboError
from grandbo.local.demo import DEMO_TENANT
from grandbo.local.settings import Settings
from grandbo.tenancy import require_tenant

CREATE_TENANT = "--create-tenant"
# the organizations a refusal names at most (a shared store may hold thousands)
NAMED_AT_MOST = 10


class UnknownOrganizationError(GrandboError):
    """A command named an organization that does not exist (and was not told to make it)."""

    def __init__(self, tenant_id: str, known: Collection[str], *, can_create: bool) -> None:
        self.tenant_id = tenant_id
        self.known = sorted(known)
        if tenant_id == DEMO_TENANT:
            how = "`grandbo demo` seeds it"
        elif can_create:
            how = f"{CREATE_TENANT} to create it"
        else:
            how = f"`grandbo add` or `grandbo people add` with {CREATE_TENANT} creates one"
        super().__init__(
            f"no organization {tenant_id!r} (organizations: {named(tenant_id, known)}); {how}"
        )


def named(tenant_id: str, known: Collection[str]) -> str:
    """The organizations that exist, in words: all of them, or the ones most like the name
    asked for and then the others, NAMED_AT_MOST in all."""
    if not known:
        return "none yet"
    if len(known) <= NAMED_AT_MOST:
        return ", ".join(sorted(known))
    alike = difflib.get_close_matches(tenant_id, sorted(known), n=3, cutoff=0.6)
    shown = [*alike, *(t for t in sorted(known) if t not in alike)][:NAMED_AT_MOST]
    return f"{', '.join(shown)} and {len(known) - len(shown)} more"


def store_organizations(settings: Settings) -> set[str]:
    """The organizations the store's registry names. A data directory that holds no
    embedded store yet has none, and none is made to say so."""
    if not settings.database_url and not (settings.data_dir / "pgdata").exists():
        return set()
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.memory.repository import MemoryRepository
    from grandbo.migrations import migrate
    from grandbo.storage.connections import connect

    urls = resolve_urls(settings)
    migrate(urls.admin)
    conn = connect(urls.app)
    try:
        return set(MemoryRepository(conn).tenant_ids())
    finally:
        conn.close()


def require_organization(
    tenant_id: str,
    *,
    keyring: Path,
    in_store: Iterable[str] | None = None,
    settings: Settings | None = None,
    can_create: bool = False,
    create: bool = False,
) -> str:
    """`tenant_id` when it is well formed and exists (or `create` says it may be made);
    else UnknownOrganizationError naming those that do. The store's registry is
    `in_store` when the caller has read it, else read from `settings`, and only when the
    keyring does not hold the organization already."""
    require_tenant(tenant_id)
    if create:
        return tenant_id
    onboarded = keyring_organizations(keyring)
    if tenant_id in onboarded:
        return tenant_id
    if in_store is None:
        in_store = store_organizations(settings) if settings is not None else ()
    known = onboarded | set(in_store)
    if tenant_id not in known:
        raise UnknownOrganizationError(tenant_id, known, can_create=can_create)
    return tenant_id
