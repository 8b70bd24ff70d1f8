"""The CDK stacks synthesized once per test session (no Docker, no bundling)."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")


def _synth(stage: str, **context: str) -> tuple[Any, Any]:
    cdk = pytest.importorskip(
        "aws_cdk", reason="install the infra extra: pip install -e '.[infra]'"
    )
    from app import build_app
    from aws_cdk.assertions import Template

    # skip asset bundling: the layer's pip step runs on `cdk deploy`, not in tests
    app = cdk.App(context={"aws:cdk:bundling-stacks": [], "stage": stage, **context})
    _, stack = build_app(app)
    return stack, Template.from_stack(stack)


@pytest.fixture(scope="session")
def dev() -> tuple[Any, Any]:
    return _synth("dev")


@pytest.fixture(scope="session")
def prod() -> tuple[Any, Any]:
    # prod refuses to synthesize without someone its alarms reach (issue 35, point 1)
    return _synth("prod", alarm_email=PROD_ALARM_EMAIL)


PROD_ALARM_EMAIL = "oncall@example.com"


RERANK_MODEL = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"


@pytest.fixture(scope="session")
def reranking() -> tuple[Any, Any]:
    """dev with the optional reranker: `-c reranker=<model ARN>`."""
    return _synth("dev", reranker=RERANK_MODEL)
