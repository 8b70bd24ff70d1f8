"""A lake moved from the local store into the local runner through its signed admin API
(issue 25, items 5-7): `POST /v1/admin/export` pages and `POST /v1/admin/import`
batches, `grandbo export/import --url`, idempotent, refusals naming their field."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.api.auth import keyring_document
from grandbo.api.client import AdminClient
from grandbo.cli import main
from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.service import MemoryService
from tests.integration.test_lake_export_import import (
    build_lake,
    event_count,
    exported,
    merging_service,
    projection,
)

from .conftest import Gateway


@pytest.fixture
def source(app_conn: psycopg.Connection[Any]) -> tuple[MemoryService, str, dict[str, Any]]:
    """A lake in the local store, in an organization of its own."""
    service = merging_service(app_conn)
    tenant = f"s-{uuid.uuid4().hex[:12]}"
    return service, tenant, build_lake(service, tenant)


def _url(gateway: Gateway) -> str:
    return f"http://{gateway.host}:{gateway.port}"


def test_a_local_lake_moves_into_the_runner_whole_and_a_second_import_changes_nothing(
    gateway: Gateway,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    source: tuple[MemoryService, str, dict[str, Any]],
) -> None:
    service, source_tenant, ids = source
    lines = exported(service, source_tenant)
    stream = read_stream(lines)
    # small bodies: the stream goes in several batches, each checked before it is stored
    client = AdminClient(_url(gateway), gateway.keys[f"{tenant}-admin"], timeout=30)

    answer = client.import_lake(stream, rename=True, max_body_bytes=4096)

    assert answer["complete"] is True
    assert answer["inserted"] == stream.manifest.count
    assert answer["projection_rebuilt"] is True
    assert answer["embed_jobs_enqueued"] == answer["entries_awaiting_vectors"] > 0
    assert projection(admin_conn, tenant) == projection(admin_conn, source_tenant)
    assert gateway.runtime.service().repository.verify_projection(tenant).mismatches == []
    # the runner's embed worker makes the vectors with its own model
    gateway.drain()
    assert gateway.runtime.service().pending_jobs(tenant) == []
    # the redacted entry arrived redacted: a tombstone, 410
    gone = gateway.admin(tenant, "GET", f"/v1/admin/entries/{ids['secret']}")
    assert gone.status == 410
    assert gone.body["tombstone"]["reason"] == "a credential was pasted"
    lesson = gateway.admin(tenant, "GET", f"/v1/admin/entries/{ids['lesson']}")
    assert lesson.status == 200
    assert lesson.body["embedded_revision"] == 2

    # the runner's export pages hold the same event lines
    pages: list[str] = []
    manifest = client.export_lake(pages.append)
    assert pages[:-1] == lines[:-1]
    assert manifest.tenant_id == tenant
    assert manifest.sha256 == stream.manifest.sha256

    again = client.import_lake(stream, rename=True)
    assert (again["inserted"], again["present"]) == (0, stream.manifest.count)
    assert again["projection_rebuilt"] is False
    assert event_count(admin_conn, tenant) == stream.manifest.count


def test_grandbo_import_and_export_through_the_admin_api(
    gateway: Gateway,
    other_tenant: str,
    admin_conn: psycopg.Connection[Any],
    source: tuple[MemoryService, str, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    service, source_tenant, _ = source
    lake = tmp_path / "lake.jsonl"
    lake.write_text("".join(line + "\n" for line in exported(service, source_tenant)))
    key = gateway.keys[f"{other_tenant}-admin"]
    keyring = tmp_path / "keyring.json"
    keyring.write_text(keyring_document([key]))
    remote = ["--url", _url(gateway), "--keyring", str(keyring), "--key-id", key.key_id]

    assert main(["import", str(lake), *remote]) == 2
    assert "rename" in capsys.readouterr().err
    assert event_count(admin_conn, other_tenant) == 0

    assert main(["import", str(lake), "--rename", *remote]) == 0
    count = len(lake.read_text().splitlines()) - 1
    assert f"{count} new, 0 already there" in capsys.readouterr().out
    assert projection(admin_conn, other_tenant) == projection(admin_conn, source_tenant)

    # the key in an environment variable, and the lake read back out of the runner
    monkeypatch.setenv("GRANDBO_ADMIN_KEY", key.model_dump_json())
    back = tmp_path / "back.jsonl"
    url = ["--url", _url(gateway)]
    assert main(["export", "--tenant", other_tenant, "-o", str(back), *url]) == 0
    assert back.read_text().splitlines()[:-1] == lake.read_text().splitlines()[:-1]
    assert main(["import", str(back), "--tenant", source_tenant, *url]) == 2
    assert "organization" in capsys.readouterr().err


def _batch(lines: list[str], start: int, end: int) -> dict[str, Any]:
    stream = read_stream(lines)
    return {
        "manifest": stream.manifest.model_dump(mode="json"),
        "offset": start,
        "chain_sha256": stream.links[start],
        "rest_sha256": stream.links[end],
        "events": [json.loads(line) for line in stream.lines[start:end]],
        "rename": True,
    }


def test_bad_export_and_import_requests_get_a_4xx_naming_the_field(
    gateway: Gateway,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    source: tuple[MemoryService, str, dict[str, Any]],
) -> None:
    service, source_tenant, _ = source
    lines = exported(service, source_tenant)
    good = _batch(lines, 0, 3)

    def refused(path: str, body: Any) -> tuple[int, str | None]:
        reply = gateway.admin(tenant, "POST", path, body)
        return reply.status, reply.body.get("field")

    assert refused("/v1/admin/export", {"limit": 0}) == (422, "limit")
    assert refused("/v1/admin/export", {"limit": "5"}) == (422, "limit")
    assert refused("/v1/admin/export", {"after": "lake1.x"}) == (400, "after")
    assert refused("/v1/admin/export", {"cursor": None})[0] == 422

    assert refused("/v1/admin/import", {**good, "rename": False}) == (400, "rename")
    edited = json.loads(json.dumps(good))
    edited["events"][1]["payload"]["title"] = "Something else entirely"
    assert refused("/v1/admin/import", edited) == (400, "events")
    skipped = _batch(lines, 0, 3)
    skipped["events"] = skipped["events"][:2]
    assert refused("/v1/admin/import", skipped) == (400, "events")
    assert refused("/v1/admin/import", {**good, "offset": 1}) == (400, "events")
    assert refused("/v1/admin/import", {**good, "chain_sha256": good["rest_sha256"]}) == (
        400,
        "chain_sha256",
    )
    bad_type = json.loads(json.dumps(good))
    bad_type["events"][0]["event_type"] = "entry_deleted"
    assert refused("/v1/admin/import", bad_type) == (422, "events.0.event_type")
    naive = json.loads(json.dumps(good))
    naive["events"][0]["recorded_at"] = "2026-01-01T00:00:00"
    assert refused("/v1/admin/import", naive) == (422, "events.0.recorded_at")
    assert refused("/v1/admin/import", {**good, "events": []}) == (422, "events")
    no_manifest = {k: v for k, v in good.items() if k != "manifest"}
    assert refused("/v1/admin/import", no_manifest) == (422, "manifest")
    assert refused("/v1/admin/import", {**good, "tenant_id": tenant})[0] == 422
    assert event_count(admin_conn, tenant) == 0  # nothing of any of them was stored

    stored = gateway.admin(tenant, "POST", "/v1/admin/import", good)
    assert stored.status == 200, stored.body
    assert stored.body["complete"] is False
    assert stored.body["next"] == {"offset": 3, "chain_sha256": good["rest_sha256"]}
    assert event_count(admin_conn, tenant) == 3


def test_an_import_the_write_path_would_refuse_is_a_4xx_and_an_old_bad_event_no_500(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """Break-it (issue 34, point 1): an entry_created titled {"a": 1} answered 500 after
    it was committed, and the organization's health answered 500 from then on."""
    from tests.integration.test_import_admission import _created, _event, _stream

    lines = _stream(tenant, [_event(_created(title={"a": 1}))])
    reply = gateway.admin(tenant, "POST", "/v1/admin/import", _batch(lines, 0, 1))
    assert (reply.status, reply.body.get("field")) == (400, "events.0.payload.title")
    assert event_count(admin_conn, tenant) == 0

    # an event an earlier version's import stored: health reports it, answers 200
    good = _stream(tenant, [_event(_created())])
    assert gateway.admin(tenant, "POST", "/v1/admin/import", _batch(good, 0, 1)).status == 200
    admin_conn.execute(
        "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
        " actor, idempotency_key) VALUES (%s, %s, 'entry_created', 1, %s, 'admin:x', 'k-bad')",
        (tenant, uuid.uuid4(), json.dumps(_created(title={"a": 1}))),
    )
    health = gateway.admin(tenant, "GET", "/v1/admin/health")
    assert health.status == 200, health.body
    assert "unreplayable_events" in [f["check"] for f in health.body["findings"]]
