"""The distances a query's collapse reads, in one self-scoped statement
(`grandbo_pair_distances`, migration 0024): the same rows as the statement it replaced,
only the caller's tenant's entries, and only inside that tenant's scope (issue 28)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import context, entry


def _write(service: MemoryService, tenant: str, count: int, tag: str) -> list[Any]:
    return [
        service.record_entry(
            tenant,
            entry(
                f"Pool exhausted on checkout after deploy {tag} {n}",
                f"Connections leaked in the retry path ({tag} {n}).",
                service="checkout-api",
            ),
            context(),
        ).entry
        for n in range(count)
    ]


def test_the_function_reads_what_the_statement_read_of_the_callers_tenant_only(
    service: MemoryService,
    repository: MemoryRepository,
    tenant: str,
    other_tenant: str,
    fake_provider: FakeEmbeddingProvider,
) -> None:
    mine = _write(service, tenant, 8, "a")
    service.embed_pending(tenant)
    unembedded = _write(service, tenant, 2, "b")  # no vector yet: in no pair
    theirs = _write(service, other_tenant, 3, "c")
    service.embed_pending(other_tenant)
    ids = sorted([e.entry_id for e in mine + unembedded + theirs] + [uuid4()], key=str)
    rows = repository.distances_in_scope(tenant, ids, fake_provider.embed_rev)
    distances = repository.distances_between(tenant, ids, fake_provider.embed_rev)
    expected = {}
    for row in rows:
        expected[row["a"], row["b"]] = expected[row["b"], row["a"]] = float(row["d"])
    assert distances == expected
    assert len(distances) == 8 * 7  # every ordered pair of the embedded eight
    named = {entry_id for pair in distances for entry_id in pair}
    assert named == {e.entry_id for e in mine}
    assert repository.distances_between(tenant, ids, "another-model") == {}


def test_the_function_runs_only_inside_its_own_tenants_scope(
    app_conn: psycopg.Connection[Any], tenant: str, other_tenant: str
) -> None:
    call = "SELECT count(*) FROM grandbo_pair_distances(%s, %s::uuid[], 'rev')"
    with app_conn.transaction(), pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_conn.execute(call, ("", [uuid4(), uuid4()]))
    assert app_conn.execute(call, (tenant, [uuid4(), uuid4()])).fetchone() == (0,)
    assert app_conn.execute("SELECT grandbo_current_tenant()").fetchone() == (None,)
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (other_tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_conn.execute(call, (tenant, [uuid4(), uuid4()]))
