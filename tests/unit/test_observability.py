"""The tracer switch: powertools Tracer with the X-Ray SDK only when asked for."""

from __future__ import annotations

import pytest
from aws_lambda_powertools import Tracer

from grandbo.observability import XRAY_SDK_ENV, Untraced, build_tracer


@pytest.mark.parametrize("value", ["", "false", "0", "no", "off"])
def test_without_the_switch_the_decorators_return_the_function_itself(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(XRAY_SDK_ENV, value)
    tracer = build_tracer()
    assert isinstance(tracer, Untraced)

    def handler(event: dict[str, int], context: object) -> int:
        return event["n"] + 1

    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_method(handler) is handler
    assert handler({"n": 1}, None) == 2


@pytest.mark.parametrize("value", ["true", "1", "TRUE", " yes "])
def test_the_switch_builds_the_powertools_tracer(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(XRAY_SDK_ENV, value)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    tracer = build_tracer()
    assert isinstance(tracer, Tracer)

    @tracer.capture_method
    def double(n: int) -> int:
        return n * 2

    assert double(21) == 42
