"""Lambda's side of the Extensions API, on loopback, for the tests and the benchmark of
the internal extension that ends an invocation after its retrievals are written
(grandbo.runtime.after_answer): registration answers an identifier, and each
`event/next` blocks until the next invocation starts, as
https://docs.aws.amazon.com/lambda/latest/dg/runtimes-extensions-api.html describes."""

from __future__ import annotations

import http.server
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from grandbo.runtime import after_answer

IDENTIFIER = "0f1e2d3c-ext"


class ExtensionsApi:
    """Lambda's Extensions API, as far as one internal extension uses it: `invoke()`
    starts an invocation (the pending Next answers with its INVOKE event); `nexts` holds,
    for each Next asked, what `moment()` said then."""

    def __init__(
        self, moment: Callable[[], object] = time.monotonic, *, refuse: bool = False
    ) -> None:
        self.invocations: queue.Queue[object] = queue.Queue()
        self.nexts: queue.Queue[object] = queue.Queue()  # what `moment` said at each Next
        self.registered: list[dict[str, Any]] = []
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/2020-01-01/extension/register" or refuse:
                    self.send_response(403)
                    self.end_headers()
                    return
                api.registered.append(
                    {"name": self.headers.get("Lambda-Extension-Name"), **json.loads(body)}
                )
                self.send_response(200)
                self.send_header("Lambda-Extension-Identifier", IDENTIFIER)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"functionName": "grandbo-query"}')

            def do_GET(self) -> None:
                if self.path != "/2020-01-01/extension/event/next":
                    self.send_response(404)
                    self.end_headers()
                    return
                if self.headers.get("Lambda-Extension-Identifier") != IDENTIFIER:
                    self.send_response(403)
                    self.end_headers()
                    return
                api.nexts.put(moment())
                event = api.invocations.get()
                payload = json.dumps(event).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.address = f"127.0.0.1:{self.server.server_address[1]}"

    def invoke(self, deadline_s: float = 10.0) -> str:
        """Start an invocation; its request id (the handler's `context.aws_request_id`)."""
        request_id = str(uuid.uuid4())
        self.send(
            {
                "eventType": "INVOKE",
                "deadlineMs": int((time.time() + deadline_s) * 1000),
                "requestId": request_id,
            }
        )
        return request_id

    def send(self, event: object) -> None:
        """The answer to the pending (or next) Next: any JSON value, as a fault would."""
        self.invocations.put(event)

    def close(self) -> None:
        after_answer.reset()  # the extension's thread ends at the event below
        self.invocations.put({"eventType": "SHUTDOWN"})
        self.server.shutdown()
