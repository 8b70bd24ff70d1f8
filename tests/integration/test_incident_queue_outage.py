"""Issue 35, point 3: incidents ride out an hour of database trouble on the incident queue.

Moto's SQS (its clock moved by the test, so an hour passes in seconds) stands between the
rule and the real incident function, whose records are delivered as Lambda's event source
mapping delivers them: a batch of received messages, and every message not reported in
`batchItemFailures` deleted. The database is out of reach (a port nothing listens on) for
the first hour, then the real one. Nothing is dead-lettered but the one malformed event
(at once, with its reason), and every incident's entries are written exactly once.

SQS's counting: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html;
Lambda's partial batch responses: https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import psycopg
import pytest
from moto import mock_aws

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.runtime.incident_queue import (
    LONGEST_RETRY_S,
    MAX_RECEIVES,
    VISIBILITY_TIMEOUT_S,
    SqsIncidentQueue,
    time_before_dead_letter_s,
)
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime
from grandbo.storage.connections import DatabaseUrls
from tests.e2e.test_incident_closed import incident_event
from tests.lambda_events import TimedContext, sqs_record

HOUR_S = 3600
STEP_S = 10  # how often the simulated event source mapping polls
UNREACHABLE = "postgresql://grandbo@127.0.0.1:1/grandbo?connect_timeout=1"


class Clock:
    """Moto's SQS clock (visibility, delays, retention), moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import time

        import moto.sqs.models as sqs_models

        self.now = time.time()
        monkeypatch.setattr(sqs_models, "unix_time", lambda dt=None: self.now)
        monkeypatch.setattr(sqs_models, "unix_time_millis", lambda dt=None: self.now * 1000)


@pytest.fixture
def sqs(aws_credentials: None) -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")
    install_runtime(None)


def _queues(sqs: Any) -> tuple[str, str, str]:
    """The incident queue as infra/messaging.py makes it: (url, arn, dead-letter url)."""
    dlq_url = sqs.create_queue(QueueName="incident-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = sqs.create_queue(
        QueueName="incidents",
        Attributes={
            "VisibilityTimeout": str(VISIBILITY_TIMEOUT_S),
            "MessageRetentionPeriod": str(14 * 86400),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVES}
            ),
        },
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return url, arn, dlq_url


def _runtime(url: str, queue: SqsIncidentQueue) -> LambdaRuntime:
    env = LambdaEnvironment.model_validate(
        {"DATABASE_URL": url, "GRANDBO_EMBEDDING_PROVIDER": "fake"}
    )
    return LambdaRuntime(env, provider=FakeEmbeddingProvider(), incident_queue=queue)


def _poll(sqs: Any, url: str, arn: str) -> tuple[int, int]:
    """One poll of the event source mapping: (records delivered, their highest receive count)."""
    from functions.incident_closed.handler import lambda_handler

    messages = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", [])
    if not messages:
        return 0, 0
    counts = {m["MessageId"]: int(m["Attributes"]["ApproximateReceiveCount"]) for m in messages}
    event = {
        "Records": [
            sqs_record(
                m["MessageId"],
                m["ReceiptHandle"],
                m["Body"],
                receive_count=counts[m["MessageId"]],
                queue_arn=arn,
            )
            for m in messages
        ]
    }
    reply = lambda_handler(event, TimedContext(30_000, "grandbo-incident-closed"))
    failed = {f["itemIdentifier"] for f in reply["batchItemFailures"]}
    for message in messages:
        if message["MessageId"] not in failed:  # Lambda deletes what succeeded
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return len(messages), max(counts.values())


def _left(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def _dead_letters(sqs: Any, url: str) -> list[dict[str, Any]]:
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", [])


def _entries(admin_conn: psycopg.Connection[Any], tenant: str) -> list[tuple[str, int]]:
    return [
        (str(key), int(n))
        for key, n in admin_conn.execute(
            "SELECT idempotency_key, count(*) FROM org_memory_events"
            " WHERE tenant_id = %s AND event_type = 'entry_created' GROUP BY 1 ORDER BY 1",
            (tenant,),
        ).fetchall()
    ]


def test_an_hour_without_the_database_dead_letters_nothing_and_writes_each_entry_once(
    sqs: Any,
    monkeypatch: pytest.MonkeyPatch,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
) -> None:
    clock = Clock(monkeypatch)
    url, arn, dlq_url = _queues(sqs)
    queue = SqsIncidentQueue(url, dlq_url, sqs)
    incidents = [f"INC-{n}" for n in range(12)]
    for incident_id in incidents:
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(incident_event(tenant, incident_id)))
    malformed = incident_event(tenant, "INC-bad")
    malformed["detail"]["findings"][0]["summary"] = "nul \x00 byte"
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(malformed))

    start = clock.now
    install_runtime(_runtime(UNREACHABLE, queue))
    delivered, highest = 0, 0
    while _left(sqs, url) and clock.now - start < 3 * HOUR_S:
        if clock.now - start >= HOUR_S:  # the failover is over
            install_runtime(_runtime(database.app, queue))
        n, count = _poll(sqs, url, arn)
        delivered, highest = delivered + n, max(highest, count)
        clock.now += STEP_S
        if clock.now - start == HOUR_S - STEP_S:
            assert _entries(admin_conn, tenant) == []  # nothing got through the outage

    assert _left(sqs, url) == 0
    # done soon after the database came back: within one back-off step
    assert clock.now - start <= HOUR_S + LONGEST_RETRY_S + 2 * STEP_S
    assert 1 < highest <= MAX_RECEIVES  # retried through the hour, never dead-lettered
    assert delivered > len(incidents) + 1
    # the malformed one, at once and with its reason; nothing else
    (dead,) = _dead_letters(sqs, dlq_url)
    assert json.loads(dead["Body"])["detail"]["incident_id"] == "INC-bad"
    assert "findings[f1].summary" in dead["MessageAttributes"]["error"]["StringValue"]
    written = _entries(admin_conn, tenant)
    # three corroborated findings per incident, each written once
    assert len(written) == 3 * len(incidents)
    assert {n for _, n in written} == {1}
    assert {key.split(":")[1] for key, _ in written} == set(incidents)


def test_a_record_failing_past_the_back_off_schedule_is_dead_lettered_not_lost(
    sqs: Any, monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    clock = Clock(monkeypatch)
    url, arn, dlq_url = _queues(sqs)
    install_runtime(_runtime(UNREACHABLE, SqsIncidentQueue(url, dlq_url, sqs)))
    body = json.dumps(incident_event(tenant, "INC-late"))
    sqs.send_message(QueueUrl=url, MessageBody=body)
    start = clock.now
    receives = 0
    while _left(sqs, url) and clock.now - start < 4 * HOUR_S:
        receives += _poll(sqs, url, arn)[0]
        clock.now += STEP_S
    assert receives == MAX_RECEIVES
    # the schedule's whole span (each receive up to one poll late), well past an hour
    elapsed = clock.now - start
    assert (
        time_before_dead_letter_s()
        <= elapsed
        <= time_before_dead_letter_s() + (MAX_RECEIVES + 1) * STEP_S
    )
    assert time_before_dead_letter_s() > HOUR_S
    (dead,) = _dead_letters(sqs, dlq_url)
    assert dead["Body"] == body  # the one shape the runbook redrives


def test_a_refused_event_the_dead_letter_queue_will_not_take_is_retried_not_dropped(
    sqs: Any, monkeypatch: pytest.MonkeyPatch, database: DatabaseUrls, tenant: str
) -> None:
    Clock(monkeypatch)
    url, arn, _ = _queues(sqs)
    gone = "https://sqs.us-east-1.amazonaws.com/123456789012/no-such-dlq"
    install_runtime(_runtime(database.app, SqsIncidentQueue(url, gone, sqs)))
    malformed = incident_event(tenant, "INC-bad")
    malformed["detail"]["findings"][0]["title"] = {"not": "text"}
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(malformed))
    assert _poll(sqs, url, arn) == (1, 1)
    assert _left(sqs, url) == 1  # reported failed: still on the queue, for the next receive


def test_a_body_nested_past_the_stack_is_dead_lettered_at_once(
    sqs: Any, monkeypatch: pytest.MonkeyPatch, database: DatabaseUrls, tenant: str
) -> None:
    """json.loads raises RecursionError, not ValueError, on deep nesting: it is a body that
    can never be recorded, not a failure to retry for two hours."""
    Clock(monkeypatch)
    url, arn, dlq_url = _queues(sqs)
    install_runtime(_runtime(database.app, SqsIncidentQueue(url, dlq_url, sqs)))
    sqs.send_message(QueueUrl=url, MessageBody="[" * 200_000 + "]" * 200_000)
    assert _poll(sqs, url, arn) == (1, 1)
    assert _left(sqs, url) == 0
    (dead,) = _dead_letters(sqs, dlq_url)
    assert "not JSON" in dead["MessageAttributes"]["error"]["StringValue"]
