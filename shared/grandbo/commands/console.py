"""`grandbo console`: the curation console on 127.0.0.1, over the signed admin API.

Locally (the default) it brings up the embedded store and every Lambda behind the local
gateway on an ephemeral loopback port, and signs with the local keyring's admin key of
the organization; with `--url https://<api>/<stage>` it signs requests to a deployed
stack with an admin key read from GRANDBO_ADMIN_KEY or `--key-file` (one key as JSON, or
a keyring document with `--key-id`). The key stays in this process: the browser gets a
session cookie, never the key.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grandbo.api.auth import Keyring, KeyringFile, SigningKey
from grandbo.commands.common import (
    StopServingError,
    keyring_path,
    require_named_organization,
    settings_from,
    stop_serving,
)
from grandbo.errors import GrandboError
from grandbo.local.demo import DEMO_TENANT
from grandbo.local.doors import is_loopback

DEFAULT_PORT = 8790
ADMIN_KEY_ENV = "GRANDBO_ADMIN_KEY"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    console = sub.add_parser(
        "console", help="the curation console in a browser, over the signed admin API"
    )
    console.add_argument(
        "--tenant", default=DEMO_TENANT, help="the organization (local mode; default: demo)"
    )
    console.add_argument("--url", help="a deployed API's base URL (https://.../<stage>)")
    console.add_argument("--key-file", help=f"the admin key as JSON (else ${ADMIN_KEY_ENV})")
    console.add_argument("--key-id", help="the key's id, when the file is a keyring")
    console.add_argument(
        "--aws",
        action="store_true",
        help="with --url: sign in with your AWS identity (IAM Identity Center: aws sso login), "
        "each request signed with SigV4, instead of an admin key",
    )
    console.add_argument("--profile", help="with --aws: the AWS profile (else the default)")
    console.add_argument("--region", help="with --aws: the API's region (else from --url)")
    console.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    console.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    console.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        help="another Host the console answers as (host:port), e.g. behind a tunnel",
    )


def admin_key(document: str, key_id: str | None) -> SigningKey:
    """One admin key from a key's JSON or a keyring document (then `key_id` picks it,
    unless it holds one admin key only)."""
    try:
        parsed = json.loads(document)
    except ValueError as exc:
        raise GrandboError(f"the admin key is not JSON: {exc}") from None
    if isinstance(parsed, dict) and "keys" in parsed:
        keyring = Keyring.from_json(document)
        if key_id is not None:
            return keyring.find(key_id, "admin")
        admins = [key for key in parsed["keys"] if "admin" in key.get("roles", [])]
        if len(admins) != 1:
            raise GrandboError("the keyring holds several admin keys: name one with --key-id")
        return keyring.find(admins[0]["key_id"], "admin")
    key = SigningKey.model_validate(parsed)
    if "admin" not in key.roles:
        raise GrandboError(f"key {key.key_id} is not an admin key")
    return key


def _deployed_key(args: argparse.Namespace) -> SigningKey:
    if args.key_file:
        return admin_key(Path(args.key_file).read_text(), args.key_id)
    document = os.environ.get(ADMIN_KEY_ENV)
    if not document:
        raise GrandboError(f"--url needs an admin key: --key-file or ${ADMIN_KEY_ENV}")
    return admin_key(document, args.key_id)


def _local_api(
    args: argparse.Namespace,
) -> tuple[str, SigningKey, Callable[[], None], Path]:
    """The local store behind the local gateway on an ephemeral loopback port."""
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from functions.embed_worker.handler import lambda_handler as embed_worker

    from grandbo.embedding.factory import provider_named
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.local.demo import seed_demo_once
    from grandbo.local.embed_queue import InProcessEmbedQueue
    from grandbo.local.runner import LocalEmbedPump, local_keyring, serve
    from grandbo.migrations import migrate
    from grandbo.runtime.lambda_container import (
        LambdaEnvironment,
        LambdaRuntime,
        install_runtime,
        runtime,
    )

    settings = settings_from(args)
    urls = resolve_urls(settings)
    migrate(urls.admin)
    keyring = local_keyring(keyring_path(settings), DEMO_TENANT)
    require_named_organization(args, settings)
    try:
        key = keyring.find(f"{args.tenant}-admin", "admin")
    except GrandboError:
        raise GrandboError(
            f"no admin key '{args.tenant}-admin' in {keyring_path(settings)}"
        ) from None
    queue = InProcessEmbedQueue()
    install_runtime(
        LambdaRuntime(
            LambdaEnvironment.model_validate(
                {
                    "DATABASE_URL": urls.app,
                    "GRANDBO_EMBEDDING_PROVIDER": settings.provider,
                    "GRANDBO_KEYRING_FILE": str(keyring_path(settings)),
                }
            ),
            provider=provider_named(settings.provider),
            embed_queue=queue,
            containers=2,
        )
    )
    pump = LocalEmbedPump(queue, embed_worker)
    if args.tenant == DEMO_TENANT:  # on a new lake only: a restart changes nothing
        seed_demo_once(runtime().service())
    queue.send(runtime().service().pending_jobs(args.tenant))
    pump.start()
    server = serve("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        pump.stop()
        runtime().close()
        if not settings.database_url:  # the embedded server this command started
            from grandbo.local.postgres import stop_embedded_postgres

            stop_embedded_postgres(settings.data_dir)

    return f"http://127.0.0.1:{server.server_address[1]}", key, stop, keyring_path(settings)


@dataclass
class RunningConsole:
    """A console bound to its socket: its address, its login link, its server."""

    server: Any
    listener: socket.socket
    link: str
    tenant_id: str
    base_url: str
    acting_as: str = ""  # the key's id, or the AWS identity's actor

    def serve_in_background(self) -> threading.Thread:
        thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.listener]}, daemon=True
        )
        thread.start()
        return thread


def iam_backend(base_url: str, profile: str | None, region: str | None) -> Any:
    """The console's backend signing with the caller's AWS identity (SigV4): stops here,
    with what to do, when there are no credentials or the stack does not map them."""
    import boto3
    from botocore.exceptions import BotoCoreError

    from grandbo.api.client import GrandboHTTPError, execute_api_region
    from grandbo.console.backend import ConsoleBackend, UnreadableAnswerError

    try:
        session = boto3.Session(profile_name=profile)
        credentials = session.get_credentials()
    except BotoCoreError as exc:  # ProfileNotFound, an unreadable config
        raise GrandboError(f"--aws: {exc}") from None
    if credentials is None:
        raise GrandboError("no AWS credentials: sign in first (aws sso login --profile ...)")
    where = region or execute_api_region(base_url) or session.region_name
    if not where:
        raise GrandboError("--aws: name the API's --region (the URL does not say it)")
    try:
        return ConsoleBackend.over_iam(base_url, credentials, where)
    except GrandboHTTPError as exc:
        raise GrandboError(
            f"{base_url} refused your AWS identity (HTTP {exc.status}): "
            f"{exc.body.get('message', exc)}"
        ) from None
    except BotoCoreError as exc:
        raise GrandboError(f"--aws: {exc}") from None
    except UnreadableAnswerError as exc:
        raise GrandboError(
            f"{base_url} did not answer as Grandbo's admin API ({exc}): is --url the stage's "
            "base (https://<api-id>.execute-api.<region>.amazonaws.com/<stage>)?"
        ) from None
    except (OSError, TimeoutError) as exc:
        raise GrandboError(f"{base_url} did not answer: {exc}") from None


def bind_console(
    base_url: str,
    key: SigningKey | None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    allowed_hosts: Sequence[str] = (),
    keyring_file: Path | None = None,
    backend: Any = None,
) -> RunningConsole:
    """The console's app over `base_url`, its socket bound (port 0: any free one). With a
    `keyring_file` (the local keyring), its people sign in with their own links, each a
    session of their own that signs with their key."""
    import uvicorn

    from grandbo.console.app import create_console
    from grandbo.console.backend import ConsoleBackend
    from grandbo.console.security import SESSION_COOKIE, ConsoleDoors

    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)  # connections wait for the server from now on, never refused
    bound = listener.getsockname()[1]
    shown = host if ":" not in host else f"[{host}]"  # as a browser writes its Host
    hosts = {f"{shown}:{bound}", *allowed_hosts}
    if is_loopback(host):
        hosts |= {f"127.0.0.1:{bound}", f"localhost:{bound}"}
    else:
        print(
            f"grandbo console: listening on {host}, beyond this machine: anyone who "
            "reaches it with the login link acts with the organization's admin key",
            file=sys.stderr,
            flush=True,
        )
    # a cookie is not bound to a port: two consoles on one machine (the local store and a
    # deployed stack) name theirs apart, or opening one would log the browser out of the
    # other for good (its login link is spent)
    if backend is None:
        assert key is not None, "a console signs with a key or with an AWS identity"
        backend = ConsoleBackend(base_url, key)
    doors = ConsoleDoors(
        hosts,
        cookie_name=f"{SESSION_COOKIE}_{bound}",
        keyring=None if keyring_file is None else KeyringFile(keyring_file).current,
        tenant_id=backend.tenant_id,
    )
    app = create_console(backend, doors)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    link = f"http://{shown}:{bound}/login?token={doors.login_token}"
    return RunningConsole(server, listener, link, backend.tenant_id, base_url, backend.key_id)


def check_deployed_key(base_url: str, key: SigningKey) -> None:
    """One signed read before the console opens: a key the API refuses (another stage's,
    a rotated one, the wrong --key-id) stops here with what to fix, instead of a console
    whose every page says 401. An API that does not answer only warns (it may be waking)."""
    from grandbo.api.client import GrandboHTTPError, base_url_parts
    from grandbo.console.backend import ConsoleBackend, UnreadableAnswerError

    try:
        parts = base_url_parts(base_url)
    except ValueError as exc:
        raise GrandboError(f"--url: {exc}") from None
    if parts.scheme == "http" and not is_loopback(str(parts.hostname)):
        print(
            f"grandbo console: {base_url} is plain http beyond this machine: every memory "
            "text read or written travels unencrypted (the key itself never does)",
            file=sys.stderr,
            flush=True,
        )
    try:
        ConsoleBackend(base_url, key, timeout=15.0).settings()
    except GrandboHTTPError as exc:
        if exc.status in (401, 403):
            raise GrandboError(
                f"{base_url} refused admin key {key.key_id!r} (HTTP {exc.status}): is it "
                "this stage's key, still in its keyring, and the URL the stage's base "
                "(https://<api-id>.execute-api.<region>.amazonaws.com/<stage>)?"
            ) from None
        print(f"grandbo console: {base_url} answered {exc}", file=sys.stderr, flush=True)
    except (OSError, TimeoutError, UnreadableAnswerError) as exc:
        print(
            f"grandbo console: {base_url} did not answer as the admin API yet: {exc}",
            file=sys.stderr,
            flush=True,
        )


def cmd_console(args: argparse.Namespace) -> int:
    people: Path | None = None
    backend = None
    if args.aws:
        if not args.url:
            raise GrandboError("--aws signs requests to a deployed stack: give its --url")
        base_url, stop = args.url.rstrip("/"), None
        backend = iam_backend(base_url, args.profile, args.region)
        key = None
    elif args.url:
        base_url, key, stop = args.url.rstrip("/"), _deployed_key(args), None
        check_deployed_key(base_url, key)
    else:
        base_url, key, stop, people = _local_api(args)
    console = bind_console(
        base_url,
        key,
        host=args.host,
        port=args.port,
        allowed_hosts=args.allowed_host,
        keyring_file=people,
        backend=backend,
    )
    sign_in = (
        ""
        if people is None
        else "\n  people sign in with their own links: grandbo people link EMAIL "
        f"--tenant {console.tenant_id} --console {console.link.split('/login')[0]}"
    )
    print(
        f"Grandbo console for organization '{console.tenant_id}' over {base_url}\n"
        f"  open {console.link}\n"
        f"  (the operator's link, acting as {console.acting_as}: it opens one session, once; "
        f"Ctrl-C stops the console){sign_in}",
        flush=True,
    )
    # uvicorn handles SIGTERM, then raises it again once it has stopped: with Python's
    # default action the process would die there, before the clean-up below (the local
    # store's embedded PostgreSQL outlived the console); this handler ends it like Ctrl-C
    signal.signal(signal.SIGTERM, stop_serving)
    try:
        console.server.run(sockets=[console.listener])
    except (KeyboardInterrupt, StopServingError):
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # already stopping
        if stop is not None:
            stop()
    return 0
