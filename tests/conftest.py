"""Shared fixtures: one real embedded PostgreSQL + pgvector per test session, migrated.

Set GRANDBO_TEST_DATABASE_URL (a superuser URL of a PostgreSQL 15+ with pgvector) to run
against another server instead.
"""

from __future__ import annotations

import os

# powertools outside Lambda: no metrics flushed to stdout, no tracing, quiet logs
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage.connections import DatabaseUrls, app_url_for, connect


@pytest.fixture(scope="session")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseUrls]:
    configured = os.environ.get("GRANDBO_TEST_DATABASE_URL")
    if configured:
        migrate(configured)
        yield DatabaseUrls(admin=configured, app=app_url_for(configured))
        return
    from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres

    data_dir: Path = tmp_path_factory.mktemp("grandbo-db")
    admin = start_embedded_postgres(data_dir)
    migrate(admin)
    yield DatabaseUrls(admin=admin, app=app_url_for(admin))
    stop_embedded_postgres(data_dir)


@pytest.fixture
def app_conn(database: DatabaseUrls) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(database.app)
    yield conn
    conn.close()


@pytest.fixture
def admin_conn(database: DatabaseUrls) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(database.admin)
    yield conn
    conn.close()


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def other_tenant() -> str:
    return f"o-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def repository(app_conn: psycopg.Connection[Any]) -> MemoryRepository:
    return MemoryRepository(app_conn)


@pytest.fixture
def fake_provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider()


@pytest.fixture
def service(repository: MemoryRepository, fake_provider: FakeEmbeddingProvider) -> MemoryService:
    return MemoryService(repository, fake_provider)


@pytest.fixture(scope="session")
def local_provider() -> Any:
    from grandbo.embedding.local import LocalMiniLMProvider

    return LocalMiniLMProvider()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials and a region for botocore (moto's, or a test's own endpoint): never an
    account's, whatever the developer's environment holds."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
