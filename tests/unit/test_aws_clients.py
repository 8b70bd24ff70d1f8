"""Issue 35, point 5: every AWS client the code builds is bounded under its function's time.

botocore's defaults (60 s connect, 60 s read, several attempts) outlive the query (10 s)
and admin (15 s) functions, so a stalled Secrets Manager or SQS call became API Gateway's
502/504. botocore's settings: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html
(total_max_attempts counts the first call, max_attempts only the retries) and
https://docs.aws.amazon.com/sdkref/latest/guide/feature-timeouts.html .
"""

from __future__ import annotations

import ast
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from grandbo.aws_clients import BOUNDS, BUILT_BY, ClientBounds, client
from grandbo.errors import StoreUnavailableError
from grandbo.runtime import secrets as aws_clients
from grandbo.runtime.lambda_container import LambdaEnvironment
from grandbo.runtime.secrets import secret_value
from grandbo.storage.connections import CONNECT_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[2]
# botocore's default, for the comparison the issue makes
DEFAULTS = ClientBounds(connect_timeout_s=60, read_timeout_s=60, max_attempts=3)
# calls the code cuts shorter than the client's bounds, with the deadline that does it
CUT_SHORT = {
    ("bedrock-runtime", "query"): LambdaEnvironment.model_fields["topic_embed_timeout_s"].default,
    ("bedrock-agent-runtime", "query"): 1.0,  # MemoryService.rerank_timeout_s
    ("bedrock-agent-runtime", "admin"): 1.0,
}
NO_DATABASE = {"authorizer"}
# the modules that build clients and read secrets, for every other one
OWNERS = {"shared/grandbo/aws_clients.py", "shared/grandbo/runtime/secrets.py"}


@pytest.fixture
def aws(aws_credentials: None) -> Iterator[None]:
    aws_clients._secrets.cache_clear()
    with mock_aws():
        yield
    aws_clients._secrets.cache_clear()


def _timeouts() -> dict[str, int]:
    from infra.functions import SPECS

    return {name: spec.timeout_s for name, spec in SPECS.items()}


@pytest.mark.parametrize("service", sorted(BOUNDS))
def test_each_client_fails_before_every_function_that_builds_it_does(service: str) -> None:
    timeouts = _timeouts()
    bounds = BOUNDS[service]
    if BUILT_BY[service]:  # a function's client, not the operator's CLI's
        assert bounds.worst_case_s < DEFAULTS.worst_case_s / 10
    assert bounds.worst_case_s < DEFAULTS.worst_case_s / 4
    for function in BUILT_BY[service]:
        call = min(bounds.worst_case_s, CUT_SHORT.get((service, function), bounds.worst_case_s))
        connect = 0 if function in NO_DATABASE else CONNECT_TIMEOUT_S
        assert call + connect < timeouts[function], (service, function, call, connect)


@pytest.mark.parametrize("service", sorted(BOUNDS))
def test_a_built_client_carries_its_bounds(service: str, aws: None) -> None:
    config = client(service).meta.config
    bounds = BOUNDS[service]
    assert config.connect_timeout == bounds.connect_timeout_s
    assert config.read_timeout == bounds.read_timeout_s
    assert config.retries == {"total_max_attempts": bounds.max_attempts, "mode": "standard"}


def _calls(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Names of the calls and imports that build a client or read a secret outside the
    clients module: boto3.client/resource, a Session's client, Powertools' providers."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in {"client", "resource"} and isinstance(func, ast.Attribute):
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id in {"boto3", "session", "Session"}:
                    yield f"{owner.id}.{name}", node.lineno
                if isinstance(owner, ast.Call):  # boto3.session.Session().client(...)
                    yield "Session().client", node.lineno
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if "parameters" in node.module and alias.name in {
                    "get_secret",
                    "get_parameter",
                    "SecretsProvider",
                    "SSMProvider",
                }:
                    yield f"import {alias.name}", node.lineno


def test_no_code_builds_a_client_or_reads_a_secret_but_through_the_clients_module() -> None:
    found = []
    for folder in ("shared/grandbo", "functions"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() in OWNERS:
                continue
            for what, line in _calls(ast.parse(path.read_text(encoding="utf-8"))):
                found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert found == []


def test_the_scan_sees_each_way_of_building_a_client() -> None:
    source = (
        "import boto3\n"
        "from aws_lambda_powertools.utilities.parameters import get_secret\n"
        "a = boto3.client('sqs')\n"
        "b = boto3.session.Session().client('sqs')\n"
        "c = boto3.resource('s3')\n"
    )
    assert [what for what, _ in _calls(ast.parse(source))] == [
        "import get_secret",
        "boto3.client",
        "Session().client",
        "boto3.resource",
    ]


def test_a_secret_is_read_once_then_served_from_the_cache(aws: None) -> None:
    secrets = boto3.client("secretsmanager")
    arn = secrets.create_secret(Name="grandbo/app", SecretString=json.dumps({"password": "p"}))[
        "ARN"
    ]
    assert json.loads(secret_value(arn)) == {"password": "p"}
    secrets.put_secret_value(SecretId=arn, SecretString=json.dumps({"password": "q"}))
    assert json.loads(secret_value(arn)) == {"password": "p"}  # within max_age
    aws_clients._secrets.cache_clear()  # a new container reads it again
    assert json.loads(secret_value(arn)) == {"password": "q"}


def _stalled_secrets_manager(monkeypatch: pytest.MonkeyPatch) -> socket.socket:
    """Secrets Manager's endpoint set to a port that accepts connections into its backlog
    and never answers: every read stalls. Returns the listening socket (close it)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    monkeypatch.setenv(
        "AWS_ENDPOINT_URL_SECRETS_MANAGER", f"http://127.0.0.1:{listener.getsockname()[1]}"
    )
    aws_clients._secrets.cache_clear()
    return listener


def test_secrets_manager_out_of_reach_is_a_store_unavailable_error_soon(
    monkeypatch: pytest.MonkeyPatch, aws_credentials: None
) -> None:
    """An endpoint that accepts and never answers: refused within the bounds, as
    StoreUnavailableError (503 with Retry-After on the APIs), not after botocore's 60 s x 3."""
    listener = _stalled_secrets_manager(monkeypatch)
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailableError, match="could not be read"):
            secret_value("arn:aws:secretsmanager:us-east-1:0:secret:grandbo-app-AbCdEf")
    finally:
        listener.close()
        aws_clients._secrets.cache_clear()
    elapsed = time.monotonic() - started
    assert BOUNDS["secretsmanager"].read_timeout_s <= elapsed  # it did wait for an answer
    assert elapsed <= BOUNDS["secretsmanager"].worst_case_s + 1


def test_a_refused_secret_read_names_the_secret_not_its_value(aws: None) -> None:
    provider = aws_clients._secrets()
    with Stubber(provider.client) as stub:
        stub.add_client_error("get_secret_value", "AccessDeniedException", "not allowed")
        with pytest.raises(StoreUnavailableError) as raised:
            secret_value("arn:aws:secretsmanager:us-east-1:0:secret:grandbo-keyring-XyZ")
    assert "grandbo-keyring-XyZ" in str(raised.value)


def test_a_query_whose_database_secret_stalls_is_a_503_with_retry_after(
    monkeypatch: pytest.MonkeyPatch, aws_credentials: None
) -> None:
    """The query function on a cold start, Secrets Manager not answering: the caller gets
    the service's 503 with Retry-After inside the function's 10 s, not API Gateway's 504."""
    from functions.query_api.handler import lambda_handler

    from grandbo.local.runner import lambda_context, proxy_event
    from grandbo.runtime.lambda_container import LambdaRuntime, install_runtime

    listener = _stalled_secrets_manager(monkeypatch)
    environment = LambdaEnvironment.model_validate(
        {
            "GRANDBO_DB_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:0:secret:grandbo-app-Ab",
            "GRANDBO_EMBEDDING_PROVIDER": "fake",
        }
    )
    install_runtime(LambdaRuntime(environment))
    event = proxy_event(
        "POST",
        "/v1/memory/query",
        {"Content-Type": "application/json"},
        b'{"topic": "the checkout database ran out of connections"}',
        authorizer={"tenant_id": "acme", "key_id": "acme-query", "principalId": "acme"},
    )
    started = time.monotonic()
    try:
        answer = lambda_handler(event, lambda_context("grandbo-query"))
    finally:
        install_runtime(None)
        listener.close()
        aws_clients._secrets.cache_clear()
    assert time.monotonic() - started < BOUNDS["secretsmanager"].worst_case_s + 1
    assert answer["statusCode"] == 503, answer
    headers = {k: v[-1] for k, v in answer.get("multiValueHeaders", {}).items()}
    assert {**headers, **answer.get("headers", {})}["Retry-After"] == "5"
    assert json.loads(answer["body"])["error"] == "unavailable"
