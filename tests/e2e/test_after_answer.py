"""In Lambda the retrieval log's write comes after the answer, yet before the container can
be frozen (grandbo.runtime.after_answer): the query function registers an internal
extension with the Extensions API, and Lambda ends an invocation only when the runtime
and every extension have asked for their next event
(https://docs.aws.amazon.com/lambda/latest/dg/runtimes-extensions-api.html).

Lambda's side of that API is played by grandbo.local.extensions_api, doing what the page
says: registration gives an identifier; each `event/next` blocks until the next
invocation starts, and it notes the database's state at the moment each one is asked
(that is when Lambda could freeze the container). The query function is the real
one, over the embedded PostgreSQL."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from functions.query_api.handler import lambda_handler as query_handler

from grandbo.local.extensions_api import ExtensionsApi
from grandbo.local.runner import lambda_context, proxy_event
from grandbo.runtime import after_answer
from grandbo.runtime.lambda_container import (
    LambdaEnvironment,
    LambdaRuntime,
    drain_retrievals,
    install_runtime,
)
from grandbo.runtime.retrieval_writer import RetrievalWriter
from grandbo.storage.connections import DatabaseUrls, connect


def _rows(admin_conn: psycopg.Connection[Any], tenant: str) -> int:
    row = admin_conn.execute(
        "SELECT count(*) FROM org_memory_retrievals WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def gate() -> threading.Event:
    """Held shut, the retrieval writer's connection waits (a slow database)."""
    return threading.Event()


@pytest.fixture
def lambda_runtime(
    database: DatabaseUrls, gate: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LambdaRuntime]:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "grandbo-query")
    runtime = LambdaRuntime(
        LambdaEnvironment.model_validate(
            {"DATABASE_URL": database.app, "GRANDBO_EMBEDDING_PROVIDER": "fake"}
        )
    )

    def slow_connect() -> psycopg.Connection[Any]:
        gate.wait(10)
        return connect(database.app)

    runtime._retrievals = RetrievalWriter(slow_connect, gather_s=0.0)
    install_runtime(runtime)
    yield runtime
    gate.set()
    after_answer.reset()
    install_runtime(None)
    runtime.close()


def _query(tenant: str) -> dict[str, Any]:
    event = proxy_event(
        "POST",
        "/v1/memory/query",
        {"Content-Type": "application/json"},
        json.dumps(
            {"topic": "checkout pool exhausted by retries", "incident_id": "INC-X"}
        ).encode(),
        authorizer={"tenant_id": tenant, "key_id": f"{tenant}-query", "principalId": tenant},
    )
    return dict(query_handler(event, lambda_context("grandbo-query")))


def _registered(api: ExtensionsApi, monkeypatch: pytest.MonkeyPatch) -> after_answer.AfterAnswer:
    monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", api.address)
    after_answer.reset()
    extension = after_answer.register_after_answer(drain_retrievals)
    assert extension is not None
    api.nexts.get(timeout=5)  # its first Next: the extension's Init is done
    return extension


def test_the_answer_goes_before_its_retrieval_is_written_and_the_invocation_ends_after(
    lambda_runtime: LambdaRuntime,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    gate: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = ExtensionsApi(lambda: _rows(admin_conn, tenant))
    try:
        extension = _registered(api, monkeypatch)
        assert api.registered == [{"name": "grandbo-retrieval-log", "events": ["INVOKE"]}]
        api.invoke()
        answer = _query(tenant)
        # answered while the write still waits for the database: not on the answer's path
        assert answer["statusCode"] == 200, answer
        assert _rows(admin_conn, tenant) == 0
        with pytest.raises(queue.Empty):  # the invocation is not over: no Next yet
            api.nexts.get(timeout=0.3)
        gate.set()
        # the extension asks for its next event only once the retrieval is in the table
        assert api.nexts.get(timeout=5) == 1
        assert extension.drained == 1
        # a second invocation of the same container: the same, one more row
        api.invoke()
        assert _query(tenant)["statusCode"] == 200
        assert api.nexts.get(timeout=5) == 2
    finally:
        api.close()


def test_an_invocation_whose_handler_fails_still_ends(
    lambda_runtime: LambdaRuntime,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    gate: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate.set()
    api = ExtensionsApi(lambda: _rows(admin_conn, tenant))
    try:
        _registered(api, monkeypatch)

        @after_answer.finishes_after_answer
        def broken(event: object, context: object) -> None:
            raise RuntimeError("the handler failed")

        api.invoke()
        with pytest.raises(RuntimeError):
            broken({}, None)
        assert api.nexts.get(timeout=5) == 0  # ended, nothing to write
    finally:
        api.close()


def test_an_invocation_never_waits_past_its_deadline(
    lambda_runtime: LambdaRuntime,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gate stays shut (the database never answers): the extension gives up before
    the invocation's deadline rather than hold it to its timeout."""
    api = ExtensionsApi(lambda: time.monotonic())
    try:
        _registered(api, monkeypatch)
        api.invoke(deadline_s=1.0)
        started = time.monotonic()
        assert _query(tenant)["statusCode"] == 200
        ended = api.nexts.get(timeout=5)
        assert isinstance(ended, float)
        assert ended - started < 1.0
    finally:
        api.close()


def test_without_the_extension_a_query_in_lambda_waits_for_its_write(
    lambda_runtime: LambdaRuntime,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    gate: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Extensions API refuses the registration: the query writes before it answers
    (a frozen container could lose a retrieval still waiting in the thread)."""
    api = ExtensionsApi(lambda: None, refuse=True)
    try:
        monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", api.address)
        after_answer.reset()
        assert after_answer.register_after_answer(drain_retrievals) is None
        gate.set()
        assert _query(tenant)["statusCode"] == 200
        assert _rows(admin_conn, tenant) == 1
    finally:
        api.close()
