"""Assemble a MemoryService from settings: database (embedded or configured) and provider."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from grandbo.embedding.base import EmbeddingProvider
from grandbo.embedding.factory import provider_named
from grandbo.local.embed_queue import InlineEmbedQueue
from grandbo.local.settings import Settings
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import migrate
from grandbo.storage.connections import DatabaseUrls, app_url_for, connect
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService


@contextmanager
def open_service(
    settings: Settings,
    *,
    apply_migrations: bool = True,
    provider: EmbeddingProvider | None = None,
    embed_writes: bool = False,
) -> Iterator[MemoryService]:
    """A service on one application-role connection, closed on exit. With `embed_writes`
    (the command line), each write's entry is embedded before the write returns."""
    urls = resolve_urls(settings)
    if apply_migrations:
        migrate(urls.admin)
    conn = connect(urls.app)
    try:
        service = MemoryService(
            MemoryRepository(conn),
            provider or provider_named(settings.provider),
            topic_embed_timeout_s=settings.topic_embed_timeout_s,
            topology=TopologyService(TopologyRepository(conn)),
        )
        if embed_writes:
            service.embed_queue = InlineEmbedQueue(service.embed_jobs)
        yield service
    finally:
        conn.close()


def resolve_urls(settings: Settings) -> DatabaseUrls:
    """URLs from settings, starting the embedded PostgreSQL when none is configured."""
    if settings.database_url:
        admin = settings.admin_database_url or settings.database_url
        return DatabaseUrls(admin=admin, app=settings.database_url)
    from grandbo.local.postgres import start_embedded_postgres

    admin = start_embedded_postgres(settings.data_dir)
    return DatabaseUrls(admin=admin, app=app_url_for(admin))
