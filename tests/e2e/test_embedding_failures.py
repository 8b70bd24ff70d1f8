"""Embedding is fire-and-forget: queue and provider failures never lose or damage an entry."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Sequence
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.response import StreamingBody
from botocore.stub import Stubber
from functions.embed_worker.handler import lambda_handler as embed_worker

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.embedding.titan import TitanEmbeddingProvider
from grandbo.errors import EnqueueError
from grandbo.local.runner import lambda_context
from grandbo.memory.domain.models import EmbedJob
from grandbo.runtime.lambda_container import install_runtime, runtime
from grandbo.storage.connections import DatabaseUrls
from tests.lambda_events import TimedContext, sqs_record

from .conftest import Gateway, start_gateway

ENTRY = {
    "title": "Kafka rebalance storm",
    "summary": "Consumers rebalanced in a loop after the broker upgrade and lag grew for hours.",
}
TOPIC = "kafka consumers keep rebalancing after the broker upgrade and lag grows"


class FlakyQueue:
    """SQS that refuses sends while `down` is set."""

    def __init__(self) -> None:
        self.down = True
        self.sent: list[EmbedJob] = []

    def send(self, jobs: Sequence[EmbedJob]) -> None:
        if self.down:
            raise EnqueueError("SQS: ServiceUnavailable")
        self.sent.extend(jobs)


def test_a_failed_enqueue_keeps_the_write_and_the_sweeper_repairs_it(
    database: DatabaseUrls, tenant: str
) -> None:
    flaky = FlakyQueue()
    gateway, server = start_gateway(database, (tenant,), FakeEmbeddingProvider(), flaky)
    try:
        created = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
        assert created.status == 201
        assert created.body["embed_enqueued"] is False
        found = gateway.query(tenant, {"topic": TOPIC}).body
        assert found["hits"][0]["entry_id"] == created.body["entry"]["entry_id"]
        assert found["hits"][0]["why"]["vector_rank"] is None

        flaky.down = False  # SQS is back; the scheduled sweeper runs once
        swept = gateway.door(
            "/local/backfill", json.dumps({"detail-type": "Scheduled Event"}).encode()
        )
        assert swept.status == 200
        mine = [job for job in flaky.sent if job.tenant_id == tenant]
        assert [str(job.entry_id) for job in mine] == [created.body["entry"]["entry_id"]]
        gateway.queue.send(mine)  # SQS delivers to the worker
        gateway.drain()
        after = gateway.query(tenant, {"topic": TOPIC}).body
        assert after["hits"][0]["why"]["vector_rank"] == 1
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)


def _sqs_event(jobs: list[EmbedJob]) -> dict[str, Any]:
    return {
        "Records": [
            sqs_record(f"m{i}", f"r{i}", job.model_dump_json()) for i, job in enumerate(jobs)
        ]
    }


class PartlyDown(FakeEmbeddingProvider):
    """Fails for texts containing a marker while `down` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if self.down and any("FAIL" in text for text in texts):
            raise ConnectionError("bedrock: ServiceUnavailable")
        return super()._embed(texts)


def test_a_batch_of_ten_with_two_failures_reports_exactly_those_two(
    database: DatabaseUrls, tenant: str
) -> None:
    provider = PartlyDown()
    gateway, server = start_gateway(database, (tenant,), provider)
    try:
        ids = []
        for i in range(10):
            marker = "FAIL" if i in (3, 7) else "ok"
            reply = gateway.admin(
                tenant,
                "POST",
                "/v1/admin/entries",
                {
                    "title": f"Finding {i} {marker}",
                    "summary": f"Summary of finding {i}: the checkout pool ran out of connections.",
                },
            )
            ids.append(reply.body["entry"]["entry_id"])
        jobs = gateway.queue.drain(limit=10)
        assert len(jobs) == 10

        response = embed_worker(_sqs_event(jobs), lambda_context("embed-worker"))

        assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == ["m3", "m7"]
        service = runtime().service()
        for i, entry_id in enumerate(ids):
            entry = service.get_entry(tenant, uuid.UUID(entry_id))
            assert entry.title.startswith(f"Finding {i}")  # intact
            assert (entry.embedded_revision is None) == (i in (3, 7))

        provider.down = False  # the fault clears; SQS redrives the two
        redrive = embed_worker(_sqs_event([jobs[3], jobs[7]]), lambda_context("embed-worker"))
        assert redrive["batchItemFailures"] == []
        assert service.pending_jobs(tenant) == []
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)


def _titan_body(payload: Any) -> dict[str, Any]:
    raw = json.dumps(payload).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


class TimingOutTitan(TitanEmbeddingProvider):
    def _invoke(self, text: str) -> list[float]:
        raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")


@pytest.mark.parametrize(
    "fault",
    ["throttling", "server_error", "timeout", "wrong_dimension", "nan"],
)
def test_titan_faults_are_reported_retried_and_leave_the_entry_intact(
    database: DatabaseUrls, tenant: str, fault: str
) -> None:
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    if fault == "throttling":
        stubber.add_client_error("invoke_model", "ThrottlingException", http_status_code=429)
    elif fault == "server_error":
        stubber.add_client_error("invoke_model", "InternalServerException", http_status_code=500)
    elif fault == "wrong_dimension":
        stubber.add_response("invoke_model", _titan_body({"embedding": [0.1] * 256}))
    elif fault == "nan":
        stubber.add_response("invoke_model", _titan_body({"embedding": [float("nan")] * 1024}))
    stubber.add_response("invoke_model", _titan_body({"embedding": [0.03] * 1024}))
    provider: TitanEmbeddingProvider = (
        TimingOutTitan(client) if fault == "timeout" else TitanEmbeddingProvider(client)
    )
    gateway, server = start_gateway(database, (tenant,), provider)
    try:
        created = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]
        (job,) = gateway.queue.drain()
        with stubber:
            failed = embed_worker(_sqs_event([job]), lambda_context("embed-worker"))
            assert failed["batchItemFailures"] == [{"itemIdentifier": "m0"}]
            entry = runtime().service().get_entry(tenant, uuid.UUID(created["entry_id"]))
            assert entry.title == ENTRY["title"]
            assert entry.embedded_revision is None
            if fault == "timeout":
                runtime().service().provider = TitanEmbeddingProvider(client)
            redriven = embed_worker(_sqs_event([job]), lambda_context("embed-worker"))
        assert redriven["batchItemFailures"] == []
        entry = runtime().service().get_entry(tenant, uuid.UUID(created["entry_id"]))
        assert entry.embedded_revision == 1
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)


def test_a_malformed_sqs_body_fails_only_its_record(gateway: Gateway, tenant: str) -> None:
    gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
    (job,) = gateway.queue.drain()
    event = _sqs_event([job, job])
    event["Records"][1]["body"] = '{"tenant_id": "x"}'
    response = embed_worker(event, lambda_context("embed-worker"))
    assert response["batchItemFailures"] == [{"itemIdentifier": "m1"}]


def test_a_duplicate_job_makes_no_bedrock_call(database: DatabaseUrls, tenant: str) -> None:
    # issue 12, item 8: Stubber answers exactly one call; a second call would raise
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    stubber.add_response("invoke_model", _titan_body({"embedding": [0.03] * 1024}))
    gateway, server = start_gateway(database, (tenant,), TitanEmbeddingProvider(client))
    try:
        gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
        (job,) = gateway.queue.drain()
        with stubber:
            first = embed_worker(_sqs_event([job]), lambda_context("embed-worker"))
            again = embed_worker(_sqs_event([job, job]), lambda_context("embed-worker"))
            stubber.assert_no_pending_responses()
        assert first["batchItemFailures"] == again["batchItemFailures"] == []
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)


def test_records_past_the_deadline_are_sent_again_not_tried(
    database: DatabaseUrls, tenant: str
) -> None:
    """Issue 23, item 12: a record the function has no time for goes back to the queue
    as a new message (a receive of its own), reported done, so deferrals never spend the
    record's retries; tried with time enough, it is embedded."""
    from functions.embed_worker.handler import DEADLINE_MARGIN_MS

    provider = FakeEmbeddingProvider()  # records every batch of texts it embeds
    gateway, server = start_gateway(database, (tenant,), provider)
    try:
        for n in range(3):
            gateway.admin(
                tenant, "POST", "/v1/admin/entries", {**ENTRY, "title": f"Rebalance storm {n}"}
            )
        jobs = gateway.queue.drain()
        late = embed_worker(_sqs_event(jobs), TimedContext(DEADLINE_MARGIN_MS - 1))
        assert late["batchItemFailures"] == []
        assert provider.calls == []
        resent = gateway.queue.drain()
        assert resent == jobs  # the same jobs, as new messages
        on_time = embed_worker(_sqs_event(resent), TimedContext(DEADLINE_MARGIN_MS + 20_000))
        assert on_time["batchItemFailures"] == []
        assert sum(len(texts) for texts in provider.calls) == 3
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)


def test_a_deferral_the_queue_refuses_is_reported_failed(
    database: DatabaseUrls, tenant: str
) -> None:
    """If the re-send fails, the record is reported failed: SQS hands it out again rather
    than the job being lost."""
    from functions.embed_worker.handler import DEADLINE_MARGIN_MS

    queue = FlakyQueue()
    queue.down = False
    gateway, server = start_gateway(database, (tenant,), FakeEmbeddingProvider(), queue)
    try:
        gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
        jobs = list(queue.sent)
        queue.down = True
        late = embed_worker(_sqs_event(jobs), TimedContext(DEADLINE_MARGIN_MS - 1))
        assert [f["itemIdentifier"] for f in late["batchItemFailures"]] == ["m0"]
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)


def test_the_sweeper_does_not_resend_a_job_in_flight(database: DatabaseUrls, tenant: str) -> None:
    # issue 12, item 8: every sweep re-sent every pending entry; now a sent job is in flight
    # for IN_FLIGHT_S and only an operator's forced replay sends it again
    queue = FlakyQueue()
    queue.down = False
    gateway, server = start_gateway(database, (tenant,), FakeEmbeddingProvider(), queue)
    try:
        created = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
        entry_id = created.body["entry"]["entry_id"]

        def sweep(**event: Any) -> list[str]:
            queue.sent.clear()
            reply = gateway.door("/local/backfill", json.dumps(event).encode())
            assert reply.status == 200, reply.body
            return [str(job.entry_id) for job in queue.sent if job.tenant_id == tenant]

        assert sweep(tenant_id=tenant) == [entry_id]  # the write's own job is not yet claimed
        assert sweep(tenant_id=tenant) == []  # in flight: not sent again
        assert sweep(**{"detail-type": "Scheduled Event"}) == []
        assert sweep(tenant_id=tenant, force=True) == [entry_id]  # an operator's replay
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)
