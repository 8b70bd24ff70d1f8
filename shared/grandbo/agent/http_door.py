"""The MCP server's streamable HTTP door: the SDK's app behind the MCP specification's
DNS-rebinding defence on every route, with Host and Origin matched exactly.

The accepted Host values follow from the address served: a loopback bind accepts its own
`address:port` and `localhost:port`; a bind to one non-loopback address accepts that
address; a wildcard bind (0.0.0.0, ::) accepts its loopback names and only the names given
with `--allowed-host`, since any name could resolve to it. No `host:*` pattern is used:
the SDK matches those as a prefix, which `127.0.0.1:8788.evil.example` passes.

Stateless mode has no standalone stream to offer, so `GET /mcp` answers 405 (as the
specification allows) instead of an SSE stream that would never carry a message.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from grandbo.errors import GrandboError

MCP_PATH = "/mcp"
LOCALHOST = "localhost"


@dataclass(frozen=True)
class BindAddress:
    """Where the door listens: `host` as the socket takes it (an IPv4-mapped IPv6 address
    becomes its IPv4 address), its family, and the spellings a client may use for it."""

    host: str
    ipv6: bool
    loopback: bool
    wildcard: bool
    spellings: tuple[str, ...]  # as in a Host header, without the port


def bind_address(requested: str) -> BindAddress:
    """`--host` as given: an address, or `localhost`."""
    if requested == LOCALHOST:
        return BindAddress("127.0.0.1", False, True, False, ("127.0.0.1", LOCALHOST))
    try:
        address = ipaddress.ip_address(requested)
    except ValueError:
        raise GrandboError(
            f"--host {requested!r}: give an IP address to bind (or localhost); name the host "
            "names clients use with --allowed-host"
        ) from None
    spellings = [_authority_host(address)]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        # an IPv6 socket refuses to bind a mapped address: serve its IPv4 address, under
        # that name, the canonical mapped form a browser sends, and the form as typed
        address = address.ipv4_mapped
        spellings = [str(address), *spellings, f"[{requested}]"]
    ipv6 = isinstance(address, ipaddress.IPv6Address)
    wildcard = address.is_unspecified
    loopback = address.is_loopback
    if loopback or wildcard:
        spellings.append(LOCALHOST)
    if wildcard:  # it serves loopback too, under these names
        spellings = ["[::1]" if ipv6 else "127.0.0.1", LOCALHOST]
    return BindAddress(str(address), ipv6, loopback, wildcard, tuple(dict.fromkeys(spellings)))


def transport_security(
    bound: BindAddress, port: int, allowed_hosts: Sequence[str] = ()
) -> TransportSecuritySettings:
    """The exact Host and Origin values the door accepts on `port`.

    An `--allowed-host` value is accepted as given (`name`, `name:port` or `[v6]:port`) and,
    without a port, also as `name:PORT`; its origins are `http://` and `https://` (a TLS
    proxy in front). A wildcard bind without any is refused: it would serve no remote
    client, or (with a pattern) every rebinding page."""
    if bound.wildcard and not allowed_hosts:
        raise GrandboError(
            f"--host {bound.host} listens on every address: name each Host clients use with "
            f"--allowed-host (e.g. --allowed-host mcp.team.internal:{port}), so that a web "
            "page rebinding its own name to this machine is refused"
        )
    served = [f"{name}:{port}" for name in bound.spellings]
    if port == 80:  # a browser leaves out the default port
        served.extend(bound.spellings)
    extra: list[str] = []
    for value in allowed_hosts:
        extra.extend(_allowed_host_values(value, port))
    hosts = list(dict.fromkeys(served + extra))
    origins = [f"http://{host}" for host in served]
    origins += [f"{scheme}://{host}" for host in extra for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=list(dict.fromkeys(origins)),
    )


def http_door_app(server: MCPServer, security: TransportSecuritySettings) -> ASGIApp:
    """The SDK's stateless streamable HTTP app (JSON answers), its own Host/Origin check
    configured with `security`, behind the same check for every other route."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
    )
    return StatelessDoor(app, security)


class StatelessDoor:
    """ASGI: the SDK's Host/Origin validation before any route (`/metrics`, a 404
    included), then 405 for `GET /mcp`, then the SDK's app."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings) -> None:
        if not security.enable_dns_rebinding_protection:
            raise ValueError("the door checks Host and Origin: enable the protection")
        self.app = app
        self.security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no route takes one; never past the Host check
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        refusal = await self.security.validate_request(request, is_post=False)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if request.method == "GET" and scope["path"].rstrip("/") == MCP_PATH:
            await _no_standalone_stream()(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _no_standalone_stream() -> Response:
    body = JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=ErrorData(
            code=INVALID_REQUEST,
            message="Method Not Allowed: this server is stateless and opens no SSE stream; "
            "POST each request",
        ),
    )
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=405,
        media_type="application/json",
        headers={"Allow": "POST"},
    )


def _authority_host(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)


def _allowed_host_values(value: str, port: int) -> list[str]:
    """`--allowed-host`: a Host header value, with or without its port; nothing else."""
    bracketed = value.startswith("[")
    name, colon, given_port = value.rpartition(":")
    if not colon or (bracketed and name.count("]") == 0):  # no port: `name` or `[v6]`
        name, given_port = value, "0"
    well_formed = (
        bool(name)
        and not any(c in value for c in "/ @?#*\\")
        and given_port.isdigit()
        and (bracketed == name.endswith("]"))
        and (bracketed or ":" not in name)  # a bare IPv6 address would be ambiguous
    )
    if not well_formed:
        raise GrandboError(
            f"--allowed-host {value!r}: give a Host value such as mcp.team.internal, "
            "mcp.team.internal:8788 or [fd00::1]:8788 (no scheme, path or pattern)"
        )
    return [value] if name != value else [value, f"{value}:{port}"]
