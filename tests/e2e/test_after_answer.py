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
from dataclasses import dataclass
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

from .test_retrieval_log import _rows


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
    runtime.close()  # its writer too, and the writer's own connection


def _query(tenant: str, request_id: str | None = None) -> dict[str, Any]:
    event = proxy_event(
        "POST",
        "/v1/memory/query",
        {"Content-Type": "application/json"},
        json.dumps(
            {"topic": "checkout pool exhausted by retries", "incident_id": "INC-X"}
        ).encode(),
        authorizer={"tenant_id": tenant, "key_id": f"{tenant}-query", "principalId": tenant},
    )
    context = lambda_context("grandbo-query")
    if request_id is not None:  # the invocation's own id, as Lambda gives it to both
        context.aws_request_id = request_id
    return dict(query_handler(event, context))


@dataclass
class Container:
    """One Lambda container as the tests drive it: Lambda's side of the Extensions API
    (each Next noting the rows written by then), the tenant, and the writer's gate."""

    api: ExtensionsApi
    tenant: str
    gate: threading.Event
    admin_conn: psycopg.Connection[Any]

    def rows(self) -> int:
        return _rows(self.admin_conn, self.tenant)

    def register(self, monkeypatch: pytest.MonkeyPatch) -> after_answer.AfterAnswer | None:
        monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", self.api.address)
        after_answer.reset()
        return after_answer.register_after_answer(drain_retrievals)


def _container(
    admin_conn: psycopg.Connection[Any], tenant: str, gate: threading.Event, **api: Any
) -> Iterator[Container]:
    container = Container(
        ExtensionsApi(lambda: _rows(admin_conn, tenant), **api), tenant, gate, admin_conn
    )
    yield container
    container.api.close()


@pytest.fixture
def container(
    lambda_runtime: LambdaRuntime,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    gate: threading.Event,
) -> Iterator[Container]:
    yield from _container(admin_conn, tenant, gate)


@pytest.fixture
def extension(container: Container, monkeypatch: pytest.MonkeyPatch) -> after_answer.AfterAnswer:
    """The extension registered at the container's init (its first Next asked)."""
    registered = container.register(monkeypatch)
    assert registered is not None
    container.api.nexts.get(timeout=5)
    return registered


def test_the_answer_goes_before_its_retrieval_is_written_and_the_invocation_ends_after(
    container: Container, extension: after_answer.AfterAnswer
) -> None:
    api = container.api
    assert api.registered == [{"name": "grandbo-retrieval-log", "events": ["INVOKE"]}]
    answer = _query(container.tenant, api.invoke())
    # answered while the write still waits for the database: not on the answer's path
    assert answer["statusCode"] == 200, answer
    assert container.rows() == 0
    with pytest.raises(queue.Empty):  # the invocation is not over: no Next yet
        api.nexts.get(timeout=0.3)
    container.gate.set()
    # the extension asks for its next event only once the retrieval is in the table
    assert api.nexts.get(timeout=5) == 1
    assert extension.drained == 1
    # a second invocation of the same container: the same, one more row
    assert _query(container.tenant, api.invoke())["statusCode"] == 200
    assert api.nexts.get(timeout=5) == 2


def test_an_invocation_whose_handler_fails_still_ends(
    container: Container, extension: after_answer.AfterAnswer
) -> None:
    container.gate.set()

    @after_answer.finishes_after_answer
    def broken(event: object, context: object) -> None:
        raise RuntimeError("the handler failed")

    context = lambda_context("grandbo-query")
    context.aws_request_id = container.api.invoke()
    with pytest.raises(RuntimeError):
        broken({}, context)
    assert container.api.nexts.get(timeout=5) == 0  # ended, nothing to write


def test_an_invocation_never_waits_past_its_deadline(
    container: Container, extension: after_answer.AfterAnswer
) -> None:
    """The gate stays shut (the database never answers): the extension gives up before
    the invocation's deadline rather than hold it to its timeout."""
    request_id = container.api.invoke(deadline_s=1.0)
    started = time.monotonic()
    assert _query(container.tenant, request_id)["statusCode"] == 200
    container.api.nexts.get(timeout=5)
    assert time.monotonic() - started < 1.0


def test_without_the_extension_a_query_in_lambda_waits_for_its_write(
    lambda_runtime: LambdaRuntime,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    gate: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Extensions API refuses the registration: the query writes before it answers
    (a frozen container could lose a retrieval still waiting in the thread)."""
    for refused in _container(admin_conn, tenant, gate, refuse=True):
        assert refused.register(monkeypatch) is None
        gate.set()
        assert _query(tenant)["statusCode"] == 200
        assert refused.rows() == 1


def test_an_invocation_whose_handler_never_ran_holds_only_itself(
    container: Container, extension: after_answer.AfterAnswer
) -> None:
    """The runtime failed before the handler (a malformed client context): that one
    invocation waits to its deadline; the next is matched by its own request id, and
    neither a handler the extension never heard of nor a lost event shifts the others."""
    container.gate.set()
    api = container.api
    started = time.monotonic()
    api.invoke(deadline_s=0.8)  # no handler runs for it
    assert api.nexts.get(timeout=5) == 0
    assert time.monotonic() - started < 1.0
    # a handler whose INVOKE the extension never got (a lost event): no row waits for a
    # later invocation's Next to pass early
    assert _query(container.tenant, "never-announced")["statusCode"] == 200
    assert _query(container.tenant, api.invoke())["statusCode"] == 200
    assert api.nexts.get(timeout=5) == 2  # after both rows, not before its handler


@pytest.mark.parametrize("odd", [[], "x", None, {"eventType": 3}, {"eventType": "INVOKE"}])
def test_an_odd_event_neither_stops_the_extension_nor_holds_an_invocation(
    container: Container, extension: after_answer.AfterAnswer, odd: object
) -> None:
    container.gate.set()
    container.api.send(odd)
    container.api.nexts.get(timeout=5)  # it asked again, at once
    assert extension.alive
    assert after_answer.active() is extension
    assert _query(container.tenant, container.api.invoke())["statusCode"] == 200
    assert container.api.nexts.get(timeout=5) == 1


def test_a_stopped_extension_is_not_counted_on(
    container: Container, extension: after_answer.AfterAnswer
) -> None:
    """Its thread gone, nobody would end an invocation after the write: the query writes
    before it answers again."""
    container.gate.set()
    extension.stopped = True
    assert after_answer.active() is None
    assert _query(container.tenant)["statusCode"] == 200
    assert container.rows() == 1
