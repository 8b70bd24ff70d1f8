"""What one request leaves behind never reaches the next (issue 11, items 9 and 10): log
lines carry only their own caller, and a hung embedding provider cannot pile up threads."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator

import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.read.recall import MAX_TOPIC_EMBED_THREADS
from grandbo.memory.service import MemoryService
from grandbo.observability import logger

from .conftest import Gateway

TOPIC = "the orders database ran out of disk because a replication slot pinned the WAL"


@pytest.fixture
def log_lines() -> Iterator[list[dict[str, object]]]:
    lines: list[dict[str, object]] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(json.loads(logger.registered_formatter.format(record)))

    handler = Capture(level=logging.WARNING)
    logger._logger.addHandler(handler)
    yield lines
    logger._logger.removeHandler(handler)


def test_a_refused_request_is_not_logged_with_the_previous_callers_identity(
    gateway: Gateway, tenant: str, log_lines: list[dict[str, object]]
) -> None:
    # Given a valid admin write, then a request signed with a key nobody issued
    written = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/entries",
        {
            "title": "Replication slot pinned WAL",
            "summary": "A dead replica's replication slot kept WAL until the orders volume filled.",
        },
    )
    assert written.status == 201
    forged = {
        "x-grandbo-key-id": "nobody",
        "x-grandbo-timestamp": "1",
        "x-grandbo-nonce": "n" * 16,
        "x-grandbo-signature": "0" * 64,
    }
    # When it is refused
    assert gateway.request("POST", "/v1/admin/entries", b"{}", forged).status == 401
    # Then its log line names no tenant and no key
    refused = [line for line in log_lines if line["message"] == "admin request not authenticated"]
    assert refused
    assert "tenant_id" not in refused[-1]
    assert "key_id" not in refused[-1]


class HungProvider(FakeEmbeddingProvider):
    """Never answers a topic until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        self.release.wait(timeout=60)
        return super()._embed(texts)


def _embed_threads() -> int:
    return sum(t.name == "grandbo-topic-embed" for t in threading.enumerate())


def test_a_hung_provider_leaves_a_bounded_number_of_threads(
    service: MemoryService, tenant: str
) -> None:
    hung = HungProvider()
    slow = MemoryService(service.repository, hung, topic_embed_timeout_s=0.05)
    before = _embed_threads()
    try:
        results = [slow.query_org_memory(tenant, TOPIC) for _ in range(50)]
        # every query answered (from tags), none waited on the ones before it
        assert all(r.metadata.vector_leg_error for r in results)
        assert _embed_threads() - before <= MAX_TOPIC_EMBED_THREADS
        assert "still outstanding" in (results[-1].metadata.vector_leg_error or "")
    finally:
        hung.release.set()
    for thread in threading.enumerate():
        if thread.name == "grandbo-topic-embed":
            thread.join(timeout=5)
    # once the provider answers again, the slots are free and the vector leg is back
    assert slow.query_org_memory(tenant, TOPIC).metadata.vector_leg_error is None
