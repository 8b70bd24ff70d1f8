"""The API handlers' resolver: powertools' REST resolver with its per-request state kept
per thread.

Powertools keeps the event being resolved on a class attribute (`BaseRouter.current_event`)
and the request context in one dict per resolver: right for Lambda, which runs one
request at a time per container, wrong for the local runner, which serves requests on
several threads. There, one request's handler would read another's event, and with it
another caller's tenant from the authorizer context. Here every read of the event, the
Lambda context and the request context goes to the current thread's own.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext


class RestResolver(APIGatewayRestResolver):
    """APIGatewayRestResolver whose current event, Lambda context and context are per thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._request = threading.local()
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEvent:
        event: APIGatewayProxyEvent = self._request.current_event
        return event

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEvent) -> None:
        self._request.current_event = value

    @property
    def lambda_context(self) -> LambdaContext:
        context: LambdaContext = self._request.lambda_context
        return context

    @lambda_context.setter
    def lambda_context(self, value: LambdaContext) -> None:
        self._request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        if not hasattr(self._request, "context"):
            self._request.context = {}
        context: dict[str, Any] = self._request.context
        return context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context = value

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        self.current_event = cast(APIGatewayProxyEvent, self._to_proxy_event(dict(event)))
        self.lambda_context = context
        return super().resolve(event, context)
