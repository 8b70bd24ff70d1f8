"""`grandbo mcp`: the MCP server over stdio (one agent, one tenant) or streamable HTTP.

Imported by the CLI for its parser; the SDK is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from grandbo.errors import GrandboError

if TYPE_CHECKING:
    from grandbo.agent.backends import MemoryBackend
    from grandbo.local.settings import Settings

DEFAULT_HTTP_PORT = 8788
TOKEN_VARIABLE = "GRANDBO_QUERY_TOKEN"  # noqa: S105 - the variable's name, not a token


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="serve Grandbo's reads to agents over the Model Context Protocol",
        description="An MCP server over the local store (same --data-dir as every other "
        "command) or a deployed Grandbo (--url, with a query token in "
        f"${TOKEN_VARIABLE}).",
    )
    mcp.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (an agent starts it) or streamable HTTP on 127.0.0.1",
    )
    mcp.add_argument("--tenant", help="stdio on the local store: whose memory (default: demo)")
    mcp.add_argument("--url", help="a deployed Grandbo's API base URL instead of the local store")
    mcp.add_argument("--timeout", type=float, default=10.0, help="remote API timeout, seconds")
    mcp.add_argument(
        "--host", default="127.0.0.1", help="http: the IP address to bind (default loopback)"
    )
    mcp.add_argument(
        "--port", type=int, default=DEFAULT_HTTP_PORT, help="the HTTP transport's port"
    )
    mcp.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="http: a Host header value clients send, accepted besides the address served "
        "(repeatable; without a port also as HOST:PORT; required with --host 0.0.0.0 or ::). "
        "Any other Host or Origin is refused: the DNS-rebinding defence",
    )
    mcp.add_argument(
        "--containers", type=int, default=4, help="local store: concurrent database connections"
    )


def cmd_mcp(args: argparse.Namespace, settings: Settings, keyring_path: Path) -> int:
    # SIGTERM (a service manager, an agent closing its servers) ends like Ctrl-C: through
    # the exit path that stops the embedded PostgreSQL, never around it
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if args.transport == "http" and args.url:
        raise GrandboError(
            "--transport http serves the local store; to reach a deployed API, run the stdio "
            f"server with --url and its query token in ${TOKEN_VARIABLE}"
        )
    if args.transport == "http" and args.tenant:
        raise GrandboError("--tenant is for stdio: over HTTP each request's token names it")
    if args.transport == "stdio" and args.allowed_host:
        raise GrandboError("--allowed-host is for --transport http")
    if args.transport == "stdio":
        return _serve_stdio(args, settings, keyring_path)
    return _serve_http(args, settings, keyring_path)


def _serve_stdio(args: argparse.Namespace, settings: Settings, keyring_path: Path) -> int:
    from grandbo.agent.server import build_server, fixed_tenant

    # stdout is the protocol's channel: nothing else may write to it, a child included
    with _stdout_to_stderr():
        if args.url:
            backend, tenant = _remote_backend(args), None
        else:
            from grandbo.local.demo import DEMO_TENANT
            from grandbo.local.organizations import require_organization

            # an organization that exists: a typo serves no empty memory
            tenant = require_organization(
                args.tenant or DEMO_TENANT, keyring=keyring_path, settings=settings
            )
            backend = _store_backend(settings, args.containers)
    with _supervised(settings, local=not args.url):
        try:
            build_server(backend, fixed_tenant(tenant)).run("stdio")
        finally:
            backend.close()
    return 0


def _serve_http(args: argparse.Namespace, settings: Settings, keyring_path: Path) -> int:
    import uvicorn

    from grandbo.agent.http_door import bind_address, http_door_app, transport_security
    from grandbo.agent.server import KeyringTokenVerifier, build_server, token_tenant
    from grandbo.api.auth import KeyringFile
    from grandbo.local.demo import DEMO_TENANT
    from grandbo.local.runner import local_keyring

    bound = bind_address(args.host)
    if not bound.loopback:
        print(
            f"grandbo mcp: listening on {bound.host}, beyond this machine: every request "
            "still needs a query token; put TLS in front of it",
            file=sys.stderr,
        )
    # the port first: a taken port or a bad address fails before a database is started
    family = socket.AF_INET6 if bound.ipv6 else socket.AF_INET
    try:
        listener = socket.create_server((bound.host, args.port), family=family)
    except OSError as exc:
        raise GrandboError(f"cannot listen on {args.host}:{args.port}: {exc}") from None
    host, port = listener.getsockname()[:2]
    try:
        security = transport_security(bound, port, args.allowed_host)
    except GrandboError:
        listener.close()
        raise
    local_keyring(keyring_path, DEMO_TENANT)  # made with its keys on first use
    # read again whenever the file changes: a key removed from it stops authenticating
    keyring = KeyringFile(keyring_path)
    backend = _store_backend(settings, args.containers)
    base = f"http://[{host}]:{port}" if family == socket.AF_INET6 else f"http://{host}:{port}"
    server = build_server(
        backend, token_tenant, verifier=KeyringTokenVerifier(keyring.current), issuer_url=base
    )
    app = http_door_app(server, security)
    print(
        f"Grandbo MCP server on {base}/mcp (streamable HTTP; Bearer query token required: "
        f"grandbo token; Host accepted: {', '.join(security.allowed_hosts)})",
        file=sys.stderr,
        flush=True,
    )
    with _supervised(settings, local=True):
        try:
            uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])
        finally:
            backend.close()
    return 0


def _store_backend(settings: Settings, containers: int) -> MemoryBackend:
    from grandbo.agent.backends import StoreBackend
    from grandbo.embedding.factory import provider_named
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.migrations import migrate
    from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime

    if not 1 <= containers <= 64:
        raise GrandboError("--containers must be 1..64")
    urls = resolve_urls(settings)
    migrate(urls.admin)
    environment = LambdaEnvironment.model_validate(
        {"DATABASE_URL": urls.app, "GRANDBO_EMBEDDING_PROVIDER": settings.provider}
    )
    runtime = LambdaRuntime(
        environment, provider=provider_named(settings.provider), containers=containers
    )
    # the model loaded before the first tool call: it meets the topic's deadline
    runtime.provider.warm_or_say()
    return StoreBackend(runtime)


def _remote_backend(args: argparse.Namespace) -> MemoryBackend:
    from grandbo.agent.backends import RemoteBackend
    from grandbo.api.client import MemoryClient

    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise GrandboError(f"--url needs a query token in ${TOKEN_VARIABLE} (grandbo token)")
    if not args.url.startswith(("https://", "http://")):
        raise GrandboError("--url must be an http(s) URL")
    return RemoteBackend(MemoryClient(args.url, token, timeout=args.timeout, component="mcp"))


@contextlib.contextmanager
def _supervised(settings: Settings, *, local: bool) -> Iterator[None]:
    """While serving the embedded store, restart its PostgreSQL if it dies (as `serve`
    does); the pooled connections reconnect on their next use."""
    if not local or settings.database_url:
        yield
        return
    from grandbo.local.postgres import PostgresSupervisor

    supervisor = PostgresSupervisor(settings.data_dir).start()
    try:
        yield
    finally:
        supervisor.stop()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 (and sys.stdout) at stderr for the block."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
