"""The writer's connection is checked once per request (issue 51's lazy writer): a request
that reaches the writer through the topology alone (the blast radius, the criticality, a
topology load) gets the same check as one through the service, so a connection the server
dropped while the container sat idle is replaced before the request uses it."""

from __future__ import annotations

from typing import Any

import psycopg

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime


def _runtime(url: str) -> LambdaRuntime:
    return LambdaRuntime(
        LambdaEnvironment.model_validate(
            {"DATABASE_URL": url, "GRANDBO_EMBEDDING_PROVIDER": "fake"}
        ),
        provider=FakeEmbeddingProvider(),
        containers=1,
    )


def test_a_topology_request_after_the_server_dropped_the_writer_is_answered(
    database: Any, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    runtime = _runtime(database.app)
    try:
        # Given a container whose last request used the writer (through the service)
        with runtime.container():
            runtime.service().set_retrieval_days(tenant, 30)
            pid = runtime.connection().info.backend_pid
        # and whose connection the server then ended (a restart, an idle timeout, a proxy
        # closing an idle client) while the container sat idle
        admin_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

        # When the next request reaches the writer through the topology alone
        with runtime.container():
            nodes = runtime.topology().node_list(tenant)

        # Then it is answered (the pooled container's first use pings, as a service's does)
        assert nodes == []
    finally:
        runtime.close()


def test_a_service_request_after_the_server_dropped_the_writer_is_answered(
    database: Any, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """The same, through the service: what the topology's request should match."""
    runtime = _runtime(database.app)
    try:
        with runtime.container():
            runtime.service().set_retrieval_days(tenant, 30)
            pid = runtime.connection().info.backend_pid
        admin_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with runtime.container():
            assert runtime.service().set_retrieval_days(tenant, 31) == 31
    finally:
        runtime.close()
