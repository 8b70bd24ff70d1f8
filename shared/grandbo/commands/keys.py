"""`grandbo token|sign`: a query token minted, or one admin request signed (its curl
headers, or the whole command), with a key of the local keyring."""

from __future__ import annotations

import argparse
import shlex
import sys

from grandbo.commands.common import keyring_path, settings_from
from grandbo.local.demo import DEMO_TENANT
from grandbo.local.serving import api_url, default_note


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`token` and `sign`."""
    tok = sub.add_parser("token", help="mint a query token from the local keyring")
    tok.add_argument(
        "--key-id",
        default=f"{DEMO_TENANT}-beacon",
        help="the query key of the keyring to mint with",
    )
    tok.add_argument("--ttl", type=int, default=3600, help="seconds the token is good for")

    sig = sub.add_parser(
        "sign",
        help="curl headers that sign one admin request (--curl: the whole command)",
        description="Signs one admin request with a key of the local keyring: the "
        "signature covers the method, the path, the exact body and the Idempotency-Key, "
        "and is good once, for 5 minutes. Example: grandbo sign POST /v1/admin/entries "
        '--body \'{"title": "...", "summary": "..."}\' --curl | sh',
    )
    sig.add_argument("method", help="the HTTP method, e.g. POST or GET")
    sig.add_argument("path", help="path after the base URL, e.g. /v1/admin/entries")
    sig.add_argument("--body", help="the exact JSON body that will be sent")
    sig.add_argument("--key-id", default=f"{DEMO_TENANT}-admin", help="the admin key to sign with")
    sig.add_argument("--idempotency-key", help="the Idempotency-Key header to send (signed)")
    sig.add_argument(
        "--curl", action="store_true", help="print a whole curl command, not only the headers"
    )
    sig.add_argument(
        "--url",
        default=None,
        help="the base URL the --curl command calls (default: the local runner serving "
        "this data directory, where it serves; else http://127.0.0.1:8787)",
    )


def cmd_token(args: argparse.Namespace) -> int:
    from grandbo.api.auth import mint_query_token
    from grandbo.local.runner import local_keyring

    keyring = local_keyring(keyring_path(settings_from(args)), DEMO_TENANT)
    print(mint_query_token(keyring.find(args.key_id, "query"), ttl_s=args.ttl))
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    from grandbo.api.auth import sign_admin_request
    from grandbo.local.runner import local_keyring

    keyring = local_keyring(keyring_path(settings_from(args)), DEMO_TENANT)
    body = (args.body or "").encode()
    headers = sign_admin_request(
        keyring.find(args.key_id, "admin"),
        args.method,
        args.path,
        body,
        idempotency_key=args.idempotency_key,
    )
    flags = " ".join(f"-H {shlex.quote(f'{name}: {value}')}" for name, value in headers.items())
    if not args.curl:
        print(flags)
        return 0
    note = default_note(settings_from(args).data_dir, args.url)
    if note:  # a curl to a runner that is not there would only exit 7
        print(f"grandbo sign: {note}", file=sys.stderr)
    command = [
        "curl -s",
        f"-X {shlex.quote(args.method.upper())}",
        shlex.quote(api_url(settings_from(args).data_dir, args.url).rstrip("/") + args.path),
        "-H 'Content-Type: application/json'",
        flags,
        *([f"--data-binary {shlex.quote(args.body)}"] if args.body else []),
    ]
    print(" ".join(command))
    return 0
