"""One contract, one source: the API Gateway query model is generated from the handler's
pydantic model, and every body one accepts the other accepts too (issue 12, item 1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft4Validator
from pydantic import ValidationError

from grandbo.api.models import FeedbackRequest, QueryRequest


def _model(template: Any, field: str) -> Draft4Validator:
    """The synthesized gateway model whose schema has `field` (one per request body)."""
    (schema,) = [
        model["Properties"]["Schema"]
        for model in template.find_resources("AWS::ApiGateway::Model").values()
        if field in model["Properties"]["Schema"].get("properties", {})
    ]
    Draft4Validator.check_schema(schema)
    return Draft4Validator(schema)


@pytest.fixture(scope="module")
def gateway_model(dev: tuple[Any, Any]) -> Draft4Validator:
    return _model(dev[1], "topic")


@pytest.fixture(scope="module")
def feedback_model(dev: tuple[Any, Any]) -> Draft4Validator:
    return _model(dev[1], "verdict")


FEEDBACK_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.text(max_size=4),
    st.sampled_from(["helpful", "not_helpful", "misleading", "HELPFUL", "", "i" * 201]),
)
FEEDBACK_BODIES = st.one_of(
    st.dictionaries(
        st.sampled_from(["verdict", "incident_id", "note", "other"]), FEEDBACK_VALUES, max_size=4
    ),
    FEEDBACK_VALUES,
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=FEEDBACK_BODIES)
def test_the_gateway_and_the_handler_accept_the_same_feedback_bodies(
    feedback_model: Draft4Validator, body: Any
) -> None:
    try:
        FeedbackRequest.model_validate_json(json.dumps(body))
        accepted = True
    except ValidationError:
        accepted = False
    assert feedback_model.is_valid(body) == accepted, body


def _pydantic_accepts(body: Any) -> bool:
    try:
        QueryRequest.model_validate_json(json.dumps(body))
    except ValidationError:
        return False
    return True


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=30),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.text(max_size=5),
    st.sampled_from(["service", "blast_radius", "dependencies", "checkout-api", "x" * 8001]),
    st.lists(st.integers(), max_size=2),
)
BODIES = st.one_of(
    st.dictionaries(
        st.sampled_from(["topic", "limit", "service", "scope", "other"]), VALUES, max_size=5
    ),
    VALUES,
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=BODIES)
def test_the_gateway_and_the_handler_accept_the_same_query_bodies(
    gateway_model: Draft4Validator, body: Any
) -> None:
    assert gateway_model.is_valid(body) == _pydantic_accepts(body), body


@pytest.mark.parametrize(
    "body",
    [
        {"topic": "the cache stampede took the database down", "scope": "dependencies"},
        {"topic": "the cache stampede took the database down", "scope": None, "service": None},
        {"topic": "the cache stampede took the database down", "limit": 25, "service": "api"},
    ],
)
def test_what_the_readme_sends_passes_the_gateway(
    gateway_model: Draft4Validator, body: dict[str, Any]
) -> None:
    assert gateway_model.is_valid(body)
    assert _pydantic_accepts(body)
