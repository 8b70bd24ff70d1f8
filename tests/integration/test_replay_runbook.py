"""The runbook's replays, run the way docs/OPERATIONS.md says, against moto's SQS and the
real store (issue 12, item 11): backfill one tenant into the embed queue, and move the
embed dead letters back onto the queue so the worker embeds them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.local.runner import lambda_context
from grandbo.memory.domain.models import EmbedJob
from grandbo.memory.service import MemoryService
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime
from grandbo.runtime.sqs_queue import SqsEmbedQueue
from grandbo.storage.connections import DatabaseUrls
from tests.integration.helpers import context, entry


@pytest.fixture
def sqs(aws_credentials: None) -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    bodies = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        bodies += [json.loads(m["Body"]) for m in batch]
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def test_backfill_one_tenant_then_redrive_dead_letters(
    sqs: Any, database: DatabaseUrls, service: MemoryService, tenant: str, other_tenant: str
) -> None:
    import functions.backfill.handler as backfill
    import functions.embed_worker.handler as embed_worker

    queue_url = sqs.create_queue(QueueName="grandbo-embed")["QueueUrl"]
    dlq_url = sqs.create_queue(QueueName="grandbo-embed-dlq")["QueueUrl"]
    mine = [
        service.record_entry(
            tenant,
            entry(
                f"Lesson {n} learned",
                f"what happened in lesson {n}: the nightly export filled the reports volume",
            ),
            context(),
        )
        for n in range(3)
    ]
    service.record_entry(
        other_tenant,
        entry(
            "Someone else's",
            "not ours to replay: another organization's expired certificate broke TLS",
        ),
        context(),
    )
    install_runtime(
        LambdaRuntime(
            LambdaEnvironment.model_validate(
                {"DATABASE_URL": database.app, "GRANDBO_EMBEDDING_PROVIDER": "fake"}
            ),
            provider=FakeEmbeddingProvider(),
            embed_queue=SqsEmbedQueue(queue_url, boto3.client("sqs", region_name="us-east-1")),
        )
    )
    try:
        # Runbook step 1: backfill one tenant (aws lambda invoke ... '{"tenant_id": ...}')
        reply = backfill.lambda_handler({"tenant_id": tenant}, lambda_context("backfill"))
        assert reply["enqueued"] == 3
        sent = _drain(sqs, queue_url)
        assert sorted(b["entry_id"] for b in sent) == sorted(str(o.entry.entry_id) for o in mine)
        assert {b["tenant_id"] for b in sent} == {tenant}
        # Runbook step 2: those jobs died (here: put on the DLQ by hand), then are moved
        # back (aws sqs start-message-move-task; moto: the same messages re-sent)
        for body in sent:
            sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps(body))
        for body in _drain(sqs, dlq_url):
            sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
        event = {
            "Records": [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": {"ApproximateReceiveCount": "1"},
                    "messageAttributes": {},
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:grandbo-embed",
                    "awsRegion": "us-east-1",
                }
                for m in messages
            ]
        }
        result = embed_worker.lambda_handler(event, lambda_context("embed-worker"))
        assert result["batchItemFailures"] == []
        for outcome in mine:
            stored = service.get_entry(tenant, outcome.entry.entry_id)
            assert stored.embedded_revision == 1
        # and the other tenant was never touched
        assert [EmbedJob(**b).tenant_id for b in sent] == [tenant] * 3
    finally:
        install_runtime(None)
