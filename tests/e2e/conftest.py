"""The local runner on an ephemeral port, wired to the test database (end-to-end fixtures)."""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from functions.embed_worker.handler import lambda_handler as embed_worker

from grandbo.api.auth import (
    Keyring,
    SigningKey,
    keyring_document,
    mint_query_token,
    new_secret,
    sign_admin_request,
)
from grandbo.api.client import user_agent
from grandbo.embedding.base import EmbeddingProvider
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.local.embed_queue import InProcessEmbedQueue
from grandbo.local.runner import LocalEmbedPump, serve
from grandbo.memory.domain.embed_queue import EmbedQueue
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime
from grandbo.storage.connections import DatabaseUrls


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Gateway:
    host: str
    port: int
    keys: dict[str, SigningKey]
    queue: InProcessEmbedQueue
    pump: LocalEmbedPump
    runtime: LambdaRuntime
    door_key: str = ""

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        *,
        identified: bool = True,
    ) -> Reply:
        """One request; it names its client (`identified`), as the deployed WAF requires."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        sent = {"User-Agent": user_agent("e2e-tests")} if identified else {}
        try:
            conn.request(method, path, body=body, headers={**sent, **(headers or {})})
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return Reply(response.status, parsed, {k.lower(): v for k, v in response.getheaders()})

    def query(self, tenant: str, payload: Any, *, raw: bytes | None = None) -> Reply:
        token = mint_query_token(self.keys[f"{tenant}-query"])
        body = raw if raw is not None else json.dumps(payload).encode()
        return self.request(
            "POST",
            "/v1/memory/query",
            body,
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )

    def admin(
        self,
        tenant: str,
        method: str,
        path: str,
        payload: Any = None,
        *,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Reply:
        body = (
            raw if raw is not None else (b"" if payload is None else json.dumps(payload).encode())
        )
        extra = dict(headers or {})
        signed = sign_admin_request(
            self.keys[f"{tenant}-admin"],
            method,
            path,
            body,
            idempotency_key=extra.pop("Idempotency-Key", None),
        )
        all_headers = {"Content-Type": "application/json", **signed, **extra}
        return self.request(method, path, body or None, all_headers)

    def door(self, path: str, body: bytes) -> Reply:
        """A request through a local door, as `grandbo serve`'s curl examples send it."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.door_key}"}
        return self.request("POST", path, body, headers)

    def publish(self, event: dict[str, Any]) -> Reply:
        return self.door("/local/events", json.dumps(event).encode())

    def drain(self) -> None:
        while self.pump.pump_once():
            pass


def keys_for(*tenants: str) -> dict[str, SigningKey]:
    keys = {}
    for tenant in tenants:
        for role in ("admin", "query"):
            keys[f"{tenant}-{role}"] = SigningKey(
                key_id=f"{tenant}-{role}-{uuid.uuid4().hex[:6]}",
                tenant_id=tenant,
                secret=new_secret(),
                roles=[role],  # type: ignore[list-item]
            )
    return keys


def start_gateway(
    database: DatabaseUrls,
    tenants: tuple[str, ...],
    provider: EmbeddingProvider,
    embed_queue: EmbedQueue | None = None,
    extra_keys: tuple[SigningKey, ...] = (),
    keyring_file: Path | None = None,
) -> tuple[Gateway, Any]:
    """The local gateway over the test database; with `keyring_file`, its keys written
    there and read back from it at every request (people added to it sign in at once)."""
    keys = {**keys_for(*tenants), **{key.key_id: key for key in extra_keys}}
    queue = InProcessEmbedQueue()
    env = {"DATABASE_URL": database.app, "GRANDBO_EMBEDDING_PROVIDER": "fake"}
    if keyring_file is not None:
        keyring_file.write_text(keyring_document(list(keys.values())))
        env["GRANDBO_KEYRING_FILE"] = str(keyring_file)
    runtime = LambdaRuntime(
        LambdaEnvironment.model_validate(env),
        provider=provider,
        embed_queue=embed_queue or queue,
        keyring=None if keyring_file is not None else Keyring(list(keys.values())),
        containers=4,
    )
    install_runtime(runtime)
    door_key = new_secret()
    server = serve("127.0.0.1", 0, door_key=door_key)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    host, port = server.server_address[0], server.server_address[1]
    gateway = Gateway(
        str(host), int(port), keys, queue, LocalEmbedPump(queue, embed_worker), runtime, door_key
    )
    return gateway, server


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider()


@pytest.fixture
def gateway(
    database: DatabaseUrls, tenant: str, other_tenant: str, provider: FakeEmbeddingProvider
) -> Iterator[Gateway]:
    gw, server = start_gateway(database, (tenant, other_tenant), provider)
    yield gw
    server.shutdown()
    server.server_close()
    gw.runtime.close()
    install_runtime(None)


def serve_keyring_file(database: DatabaseUrls, keyring: Path) -> tuple[Any, str]:
    """A runner whose runtime reads its keyring from `keyring`, as `grandbo serve` does."""
    env = LambdaEnvironment.model_validate(
        {
            "DATABASE_URL": database.app,
            "GRANDBO_EMBEDDING_PROVIDER": "fake",
            "GRANDBO_KEYRING_FILE": str(keyring),
        }
    )
    install_runtime(LambdaRuntime(env, containers=2))
    server = serve("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop_runner(server: Any) -> None:
    from grandbo.runtime.lambda_container import runtime

    server.shutdown()
    server.server_close()
    runtime().close()
    install_runtime(None)


# -- the people tests' keyring and runner (tests/e2e/test_people*.py) -------------------


@pytest.fixture
def keyring_file(tmp_path: Path, tenant: str) -> Path:
    """A keyring file holding the organization's service key (people are added to it)."""
    from grandbo.api.auth import SigningKey, keyring_document, new_secret

    path = tmp_path / "keyring.json"
    service = SigningKey(
        key_id=f"{tenant}-admin",
        tenant_id=tenant,
        secret=new_secret(),
        roles=["admin"],
        stands_for="the incident pipeline",
    )
    path.write_text(keyring_document([service]))
    return path


@pytest.fixture
def base(database: DatabaseUrls, keyring_file: Path) -> Iterator[str]:
    """A runner reading its keyring from `keyring_file`, as `grandbo serve` does: its URL."""
    server, url = serve_keyring_file(database, keyring_file)
    yield url
    stop_runner(server)
