"""The MCP server over stdio: the SDK's transport, with two answers it does not give.

A line that is not JSON gets a JSON-RPC parse error (-32700), and JSON that is not a
JSON-RPC message an invalid-request error (-32600), both with a null id, as JSON-RPC 2.0
says; the SDK only logs them. And when input ends, the requests already read are answered
before the server stops (for at most `DRAIN_SECONDS`): the SDK's dispatcher cancels them
at end of input, so `printf '...tools/call...' | grandbo mcp` exited 0 having answered
nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from pydantic import ValidationError

DRAIN_SECONDS = 30.0


class RequestsInFlight:
    """Ids of the requests read and not yet answered (a repeated id counts twice)."""

    def __init__(self) -> None:
        self._ids: Counter[RequestId] = Counter()
        self._idle = anyio.Event()
        self._idle.set()

    def read(self, request_id: RequestId) -> None:
        if self._idle.is_set():
            self._idle = anyio.Event()
        self._ids[request_id] += 1

    def answered(self, request_id: RequestId) -> None:
        if self._ids[request_id] <= 1:
            self._ids.pop(request_id, None)
        else:
            self._ids[request_id] -= 1
        if not self._ids:
            self._idle.set()

    async def all_answered(self) -> None:
        await self._idle.wait()


@asynccontextmanager
async def answering_every_request(
    read_stream: ReadStream[SessionMessage | Exception],
    write_stream: WriteStream[SessionMessage],
    *,
    drain_seconds: float = DRAIN_SECONDS,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Streams for the server between the SDK's stdio streams: lines the SDK could not
    read are answered here, and end of input reaches the server only once every request
    read before it has been answered (or `drain_seconds` have passed)."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    in_flight = RequestsInFlight()
    reading = anyio.CancelScope()

    async def relay_input() -> None:
        with reading:
            async with to_server:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(_unreadable(item)))
                        continue
                    if isinstance(item.message, JSONRPCRequest):
                        in_flight.read(item.message.id)
                    await to_server.send(item)
                with anyio.move_on_after(drain_seconds):
                    await in_flight.all_answered()

    async def relay_output() -> None:
        async with write_stream, from_server:
            async for item in from_server:
                await write_stream.send(item)  # written before it counts as answered
                answer = item.message
                if isinstance(answer, JSONRPCResponse | JSONRPCError) and answer.id is not None:
                    in_flight.answered(answer.id)

    async with anyio.create_task_group() as relays:
        relays.start_soon(relay_input)
        relays.start_soon(relay_output)
        try:
            yield server_reads, server_writes
        finally:
            # the server has stopped: what it wrote is still relayed; input is not read on
            await server_writes.aclose()
            reading.cancel()


def _unreadable(problem: Exception) -> JSONRPCError:
    not_json = not isinstance(problem, ValidationError) or any(
        error["type"] == "json_invalid" for error in problem.errors()
    )
    error = (
        ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON")
        if not_json
        else ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message")
    )
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)
