"""Assemble a MemoryService from settings: database (embedded or configured) and provider."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from grandbo.database import connect, resolve_urls
from grandbo.embedding.base import EmbeddingProvider
from grandbo.embedding.factory import provider_named
from grandbo.migrations import migrate
from grandbo.repository import MemoryRepository
from grandbo.service import MemoryService
from grandbo.settings import Settings
from grandbo.topology_repository import TopologyRepository
from grandbo.topology_service import TopologyService


@contextmanager
def open_service(
    settings: Settings,
    *,
    apply_migrations: bool = True,
    provider: EmbeddingProvider | None = None,
) -> Iterator[MemoryService]:
    """A service on one application-role connection, closed on exit."""
    urls = resolve_urls(settings)
    if apply_migrations:
        migrate(urls.admin)
    conn = connect(urls.app)
    try:
        yield MemoryService(
            MemoryRepository(conn),
            provider or provider_named(settings.provider),
            topic_embed_timeout_s=settings.topic_embed_timeout_s,
            topology=TopologyService(TopologyRepository(conn)),
        )
    finally:
        conn.close()
