"""AWS adapters against moto: the SQS embed queue, keyrings and database secrets."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from grandbo.api.auth import Keyring, SigningKey, keyring_document, new_secret
from grandbo.errors import EnqueueError, GrandboError
from grandbo.memory.domain.models import EmbedJob
from grandbo.runtime.lambda_container import (
    LambdaEnvironment,
    LambdaRuntime,
    database_url_from_secret,
)
from grandbo.runtime.sqs_queue import SqsEmbedQueue
from tests.lambda_events import TimedContext, sqs_record


@pytest.fixture
def aws(aws_credentials: None) -> Iterator[None]:
    with mock_aws():
        yield


def _jobs(n: int) -> list[EmbedJob]:
    return [EmbedJob(tenant_id="acme", entry_id=uuid.uuid4(), revision=1) for _ in range(n)]


def _receive_all(sqs: Any, url: str) -> list[dict[str, Any]]:
    bodies = []
    while True:
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not batch:
            return bodies
        bodies += [json.loads(m["Body"]) for m in batch]
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
            ],
        )


def test_sqs_queue_sends_every_job_in_batches_of_ten(aws: None) -> None:
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="grandbo-embed")["QueueUrl"]
    jobs = _jobs(23)
    SqsEmbedQueue(url, client=sqs).send(jobs)
    received = _receive_all(sqs, url)
    assert sorted(b["entry_id"] for b in received) == sorted(str(j.entry_id) for j in jobs)
    assert all(b["tenant_id"] == "acme" and b["revision"] == 1 for b in received)


def test_sqs_queue_failure_raises_an_enqueue_error(aws: None) -> None:
    sqs = boto3.client("sqs")
    missing = "https://sqs.us-east-1.amazonaws.com/123456789012/does-not-exist"
    with pytest.raises(EnqueueError, match="SQS refused"):
        SqsEmbedQueue(missing, client=sqs).send(_jobs(1))


def _keys() -> list[SigningKey]:
    return [
        SigningKey(key_id="acme-admin-1", tenant_id="acme", secret=new_secret(), roles=["admin"]),
        SigningKey(key_id="acme-admin-2", tenant_id="acme", secret=new_secret(), roles=["admin"]),
        SigningKey(key_id="beta-query", tenant_id="beta", secret=new_secret(), roles=["query"]),
    ]


def test_the_keyring_loads_from_secrets_manager_with_several_active_keys(aws: None) -> None:
    secrets = boto3.client("secretsmanager")
    arn = secrets.create_secret(Name="grandbo/keyring", SecretString=keyring_document(_keys()))[
        "ARN"
    ]
    env = LambdaEnvironment.model_validate(
        {"DATABASE_URL": "postgresql://unused", "GRANDBO_KEYRING_SECRET_ARN": arn}
    )
    keyring = LambdaRuntime(env).keyring()
    assert keyring.find("acme-admin-1", "admin").tenant_id == "acme"
    assert keyring.find("acme-admin-2", "admin").tenant_id == "acme"  # rotation: both active
    assert keyring.find("beta-query", "query").tenant_id == "beta"


def test_a_malformed_keyring_fails_loudly() -> None:
    with pytest.raises(GrandboError, match="malformed"):
        Keyring.from_json('{"keys": [{"key_id": "k", "tenant_id": "acme", "secret": "short"}]}')
    duplicate = keyring_document([_keys()[0], _keys()[0]])
    with pytest.raises(GrandboError, match="twice"):
        Keyring.from_json(duplicate)


def test_a_secret_never_appears_in_a_keys_repr() -> None:
    key = _keys()[0]
    assert key.secret not in repr(key)


def test_database_secrets_become_verify_full_tls_connection_urls() -> None:
    from psycopg.conninfo import conninfo_to_dict

    secret = json.dumps(
        {
            "host": "db.cluster.example",
            "port": 5432,
            "username": "grandbo_app",
            "password": "p@ss word",
            "dbname": "grandbo",
        }
    )
    direct = conninfo_to_dict(database_url_from_secret(secret))
    assert direct["host"] == "db.cluster.example"
    proxied = conninfo_to_dict(database_url_from_secret(secret, "grandbo-dev.proxy.example"))
    assert proxied["host"] == "grandbo-dev.proxy.example"  # the name the certificate must bear
    assert proxied["user"] == "grandbo_app"
    assert proxied["password"] == "p@ss word"
    # issue 12, item 13: the certificate is verified, against a bundle that holds the
    # Amazon root RDS Proxy's ACM certificate chains to
    assert proxied["sslmode"] == "verify-full"
    with open(str(proxied["sslrootcert"]), encoding="utf-8") as bundle:
        assert "CN=Amazon Root CA 1 " in bundle.read()


def test_the_environment_requires_a_database() -> None:
    with pytest.raises(ValueError, match="DATABASE_URL or GRANDBO_DB_SECRET_ARN"):
        LambdaEnvironment.model_validate({"GRANDBO_EMBEDDING_PROVIDER": "titan"})


def test_a_job_deferred_more_times_than_the_redrive_allows_is_never_dead_lettered(
    aws: None,
) -> None:
    """Issue 23, item 12, on SQS's own counting (moto): the embed worker defers a record
    near its deadline by sending its job again, so however often that happens the job's
    messages are each received once and nothing reaches the dead-letter queue."""
    from functions.embed_worker.handler import DEADLINE_MARGIN_MS
    from functions.embed_worker.handler import lambda_handler as embed_worker

    from grandbo.runtime.lambda_container import install_runtime

    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName="grandbo-embed-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    redrive = {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"], "maxReceiveCount": 2}
    url = sqs.create_queue(
        QueueName="grandbo-embed",
        Attributes={"RedrivePolicy": json.dumps(redrive), "VisibilityTimeout": "0"},
    )["QueueUrl"]
    (job,) = _jobs(1)
    queue = SqsEmbedQueue(url, client=sqs)
    queue.send([job])
    env = LambdaEnvironment.model_validate({"DATABASE_URL": "postgresql://unused/none"})
    install_runtime(LambdaRuntime(env, embed_queue=queue))

    try:
        for _ in range(5):  # more deferrals than maxReceiveCount
            (message,) = sqs.receive_message(
                QueueUrl=url, AttributeNames=["ApproximateReceiveCount"]
            )["Messages"]
            assert message["Attributes"]["ApproximateReceiveCount"] == "1"
            record = sqs_record(message["MessageId"], message["ReceiptHandle"], message["Body"])
            reply = embed_worker({"Records": [record]}, TimedContext(DEADLINE_MARGIN_MS - 1))
            assert reply["batchItemFailures"] == []
            # Lambda deletes what the function reported done
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    finally:
        install_runtime(None)
    assert [EmbedJob.model_validate(b) for b in _receive_all(sqs, url)] == [job]
    assert _receive_all(sqs, dlq) == []
