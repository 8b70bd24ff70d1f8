"""Work a Lambda container finishes after it answered: the retrieval log's write (issue 36,
point 3), off the answer's path in AWS too.

Lambda may freeze a container as soon as an invocation ends, and reclaim it frozen; a
retrieval still waiting in the writer's thread then is lost. An invocation ends, though,
only once the runtime *and every registered extension* have asked the Extensions API for
their next event: "The Invoke phase ends after the runtime and all extensions signal
that they are done by sending a Next API request", and an internal extension "runs as a
separate thread in the runtime process"
(https://docs.aws.amazon.com/lambda/latest/dg/runtimes-extensions-api.html). The
function's answer goes back to its caller when the runtime posts it, before an
extension's work after it (Lambda reports that time apart, as
PostRuntimeExtensionsDuration).

So the query functions register one internal extension at init (`register_after_answer`,
from their module's import: an internal extension must register before the runtime's
first Next ends the Init phase). At each INVOKE event its thread waits until that
invocation's handler has returned (`answered`, called with the context's request id as
the decorated handler returns; the event's `requestId` is the same id, so a lost event or
a handler the runtime never reached costs that one invocation at most, to its deadline),
drains the retrieval writer (at most DRAIN_S, what a query waited before), and only then
asks for the next event: the caller has its answer, and the container is not frozen
before its retrieval is written. Where no extension could be registered (not in Lambda,
or the API refused), or its thread has stopped, `active()` is None and the query waits
for its write as before (DURABLE_WAIT_S).
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

_log = logging.getLogger(__name__)

EXTENSION_NAME = "grandbo-retrieval-log"
API_VERSION = "2020-01-01"
REGISTER_TIMEOUT_S = 2.0
# the longest a finished invocation waits for its retrievals' write: what a query waited
# before it answered without the extension, so a slow database holds no container longer
DRAIN_S = 0.5
_MARGIN_S = 0.2  # kept before the invocation's deadline
_REMEMBERED = 64  # request ids of the latest handlers that returned

Handler = TypeVar("Handler", bound=Callable[..., Any])

_active: AfterAnswer | None = None
_lock = threading.Lock()


class AfterAnswer:
    """One internal extension: it ends each invocation only after that invocation's
    handler returned (matched by request id: the INVOKE event's `requestId` is the
    handler's `context.aws_request_id`) and `drain` ran, or DRAIN_S passed."""

    def __init__(self, runtime_api: str, identifier: str, drain: Callable[[float], object]):
        self._runtime_api = runtime_api
        self._identifier = identifier
        self._drain = drain
        self._cond = threading.Condition()
        self._returned: OrderedDict[str, None] = OrderedDict()  # request ids, the latest
        self._thread: threading.Thread | None = None
        self.drained = 0  # invocations whose retrievals were drained in time
        self.stopped = False  # forgotten (tests): the thread ends at its next event

    @classmethod
    def register(cls, runtime_api: str, drain: Callable[[float], object]) -> AfterAnswer | None:
        """Register with the Extensions API and start the extension's thread; None (and a
        warning) if the API refuses or does not answer."""
        try:
            # AWS_LAMBDA_RUNTIME_API: Lambda's own loopback endpoint, plain HTTP
            headers, _ = _call(
                runtime_api,
                "POST",
                f"/{API_VERSION}/extension/register",
                json.dumps({"events": ["INVOKE"]}).encode(),
                {"Lambda-Extension-Name": EXTENSION_NAME, "Content-Type": "application/json"},
                REGISTER_TIMEOUT_S,
            )
            identifier = headers.get("Lambda-Extension-Identifier")
        except (OSError, ValueError, http.client.HTTPException) as exc:
            _log.warning("retrieval log: no extension registered (%s): written before answers", exc)
            return None
        if not identifier:
            _log.warning("retrieval log: the Extensions API gave no identifier")
            return None
        extension = cls(runtime_api, identifier, drain)
        extension._thread = threading.Thread(
            target=extension._run, name=EXTENSION_NAME, daemon=True
        )
        extension._thread.start()
        return extension

    @property
    def alive(self) -> bool:
        """Its thread still runs (else nobody ends an invocation after its write)."""
        return self._thread is not None and self._thread.is_alive() and not self.stopped

    def answered(self, request_id: str | None) -> None:
        """The handler of invocation `request_id` returned (or raised)."""
        if request_id is None:
            return
        with self._cond:
            self._returned[request_id] = None
            while len(self._returned) > _REMEMBERED:
                self._returned.popitem(last=False)
            self._cond.notify_all()

    def _next_event(self) -> object:
        # no timeout: it blocks until the next invocation (or for good, frozen)
        _, body = _call(
            self._runtime_api,
            "GET",
            f"/{API_VERSION}/extension/event/next",
            None,
            {"Lambda-Extension-Identifier": self._identifier},
            None,
        )
        return json.loads(body or b"{}")

    def _run(self) -> None:
        failures = 0
        while not self.stopped:
            try:
                event = self._next_event()  # also says: the last invocation is done
                failures = 0
                if isinstance(event, dict) and event.get("eventType") == "INVOKE":
                    if not self.stopped:
                        self._finish(event)
                elif not isinstance(event, dict):
                    _log.warning("retrieval log extension: an event that is not an object")
            except Exception as exc:  # never let the thread die: an invocation would wait
                failures += 1
                _log.warning("retrieval log extension: %s: %s", type(exc).__name__, exc)
                time.sleep(min(1.0, 0.05 * failures))

    def _finish(self, event: dict[str, Any]) -> None:
        deadline = event.get("deadlineMs")
        request_id = event.get("requestId")
        budget = (
            max(0.0, float(deadline) / 1000 - time.time() - _MARGIN_S)
            if isinstance(deadline, int | float) and not isinstance(deadline, bool)
            else DRAIN_S
        )
        started = time.monotonic()
        if isinstance(request_id, str):
            with self._cond:  # this invocation's own handler (a lost event shifts nothing)
                self._cond.wait_for(lambda: request_id in self._returned, budget)
        left = min(DRAIN_S, budget - (time.monotonic() - started))
        if left > 0 and self._drain(left):
            self.drained += 1


def register_after_answer(drain: Callable[[float], object]) -> AfterAnswer | None:
    """The process's extension, registered once when the Lambda runtime API is here
    (AWS_LAMBDA_RUNTIME_API); None elsewhere."""
    global _active
    runtime_api = os.environ.get("AWS_LAMBDA_RUNTIME_API")
    with _lock:
        if _active is None and runtime_api:
            _active = AfterAnswer.register(runtime_api, drain)
        return _active


def active() -> AfterAnswer | None:
    """The registered extension while its thread runs, or None: then a query waits for
    its retrieval's write."""
    extension = _active
    return extension if extension is not None and extension.alive else None


def reset() -> None:
    """Forget the registered extension (tests): its thread ends at its next event."""
    global _active
    with _lock:
        if _active is not None:
            _active.stopped = True
        _active = None


def finishes_after_answer(handler: Handler) -> Handler:
    """A Lambda handler whose invocation the extension ends only after it returned."""

    @functools.wraps(handler)
    def wrapped(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return handler(event, context, *args, **kwargs)
        finally:
            extension = _active
            if extension is not None:
                extension.answered(getattr(context, "aws_request_id", None))

    return wrapped  # type: ignore[return-value]


def _call(
    runtime_api: str,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout_s: float | None,
) -> tuple[http.client.HTTPMessage, bytes]:
    """One request to Lambda's Extensions API (`host:port`, plain HTTP on loopback): its
    headers and body; OSError for an answer that is not 2xx. http.client, not
    urllib.request: the query function's cold start does not pay urllib's import."""
    conn = http.client.HTTPConnection(runtime_api, timeout=timeout_s)
    try:
        conn.request(method, path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        if not 200 <= answer.status < 300:
            raise OSError(f"the Extensions API answered {answer.status} to {method} {path}")
        return answer.headers, data
    finally:
        conn.close()
