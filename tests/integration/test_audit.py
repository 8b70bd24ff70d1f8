"""The health audit (issue 14, item 6): each finding produced by breaking the state on
purpose, `--repair` fixing what is safe to fix, the exit code a scheduled job alarms on."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from grandbo.cli import main
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.curation import audit as audit_module
from grandbo.memory.curation.audit import EMBED_GRACE_S, audit, repair
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import context, entry


def lessons(service: MemoryService, tenant: str, n: int = 3, **extra: Any) -> list[uuid.UUID]:
    return [
        service.record_entry(
            tenant,
            entry(
                f"Pool exhausted, case {i}",
                f"Checkout requests waited for a database connection until timeout ({i}).",
                **extra,
            ),
            context(),
        ).entry.entry_id
        for i in range(n)
    ]


def later(service: MemoryService, **delta: float) -> MemoryService:
    when = datetime.now(UTC) + timedelta(**delta)
    return MemoryService(service.repository, service.provider, clock=lambda: when)


def checks(service: MemoryService, tenant: str) -> dict[str, int]:
    return {f.check: f.count for f in audit(service, tenant).findings}


def test_a_healthy_lake_has_no_finding(service: MemoryService, tenant: str) -> None:
    lessons(service, tenant)
    assert checks(later(service, seconds=EMBED_GRACE_S * 2), tenant) == {"unembedded": 3}
    assert checks(service, tenant) == {}  # a fresh write waiting for its job is not a problem
    service.embed_pending(tenant)
    health = audit(later(service, days=1), tenant)
    assert health.healthy
    assert health.findings == []


def test_each_broken_state_is_found_and_repaired(
    repository: MemoryRepository,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    database: DatabaseUrls,
) -> None:
    blue = MemoryService(repository, FakeEmbeddingProvider(model_id="fake-blue"))
    ids = lessons(blue, tenant, 4)
    episodic = lessons(blue, tenant, 1, kind="episodic")[0]
    blue.embed_pending(tenant)
    for n in range(2):
        blue.record_feedback(  # two callers: the review list weighs callers, not verdicts
            tenant,
            ids[0],
            {"verdict": "misleading", "incident_id": f"I{n}"},
            context(actor=f"investigator-{n}"),
        )
    # break it: a vector of another model (the provider changed), a projection row edited
    # behind the log's back, a tag posting lost, an index missing at a tiny threshold
    green = MemoryService(repository, FakeEmbeddingProvider(model_id="fake-green"))
    with admin_conn.transaction():
        admin_conn.execute(
            "UPDATE org_memory_entries SET title = 'edited' WHERE tenant_id = %s AND entry_id = %s",
            (tenant, ids[1]),
        )
        admin_conn.execute(
            "DELETE FROM org_memory_tag_postings WHERE tenant_id = %s AND entry_id = %s",
            (tenant, ids[2]),
        )
    monkeypatch.setattr(audit_module, "HNSW_MIN_ENTRIES", 3)
    future = later(green, days=40)  # the episodic entry has expired, the vectors waited

    found = checks(future, tenant)
    assert found == {
        "unembedded": 5,
        "stale_vectors": 5,
        "projection_drift": 1,
        "index_drift": 1,
        "expired_active": 1,
        "missing_index": 1,
        "misleading": 1,
    }

    health = repair(
        future,
        audit(future, tenant),
        build_index=lambda: ensure_hnsw_indexes(database.admin, min_entries=3),
    )
    repaired = {f.check: f.repaired for f in health.findings}
    assert repaired["misleading"] is None  # a person's call: listed, never changed
    assert all(repaired[c] for c in found if c != "misleading"), repaired
    assert not health.healthy
    assert checks(future, tenant) == {"misleading": 1}
    assert green.get_entry(tenant, ids[1]).title == "Pool exhausted, case 1"  # from the log
    assert green.get_entry(tenant, episodic).status.value == "retired"


def test_grandbo_audit_exits_1_until_repaired(
    database: DatabaseUrls, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", database.app)
    monkeypatch.setenv("GRANDBO_ADMIN_DATABASE_URL", database.admin)
    monkeypatch.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")
    tenant = f"audit-{uuid.uuid4().hex[:8]}"
    with connect(database.app) as conn:
        service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
        lessons(service, tenant)
        service.embed_pending(tenant)
    with psycopg.connect(database.admin, autocommit=True) as admin:
        admin.execute("DELETE FROM org_memory_tag_postings WHERE tenant_id = %s", (tenant,))
    assert main(["audit", "--tenant", tenant, "--json"]) == 1
    (report,) = json.loads(capsys.readouterr().out)
    assert report["healthy"] is False
    assert [f["check"] for f in report["findings"]] == ["index_drift"]
    assert main(["audit", "--tenant", tenant, "--repair"]) == 0
    assert "index_drift (1)" in capsys.readouterr().out
    assert main(["audit", "--tenant", tenant]) == 0
    assert capsys.readouterr().out.strip() == f"{tenant}: healthy"
    assert main(["audit", "--tenant", f"{tenant}-typo"]) == 1  # not "healthy"
    assert "no organization" in capsys.readouterr().err
