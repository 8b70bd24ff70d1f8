"""`grandbo export` and `grandbo import`: an organization's lake (its event log as JSON
lines with a manifest, `grandbo.memory.domain.lake_stream`) out of one store and into
another, the local one (DATABASE_URL or the embedded default) or a runner or deployed
stack through its signed admin API (`--url`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grandbo.api.auth import Keyring, SigningKey
from grandbo.api.client import AdminClient, GrandboHTTPError
from grandbo.commands.common import (
    add_create_tenant,
    keyring_path,
    require_named_organization,
    settings_from,
)
from grandbo.commands.progress import terminal_progress
from grandbo.errors import GrandboError, InvalidInputError
from grandbo.local.bootstrap import open_service
from grandbo.local.demo import DEMO_TENANT
from grandbo.local.organizations import require_organization
from grandbo.memory.domain.lake_stream import LakeStream, read_stream
from grandbo.memory.lifecycle.lake import LakeTransfer

ADMIN_KEY_ENV = "GRANDBO_ADMIN_KEY"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser(
        "export",
        help="write an organization's lake (its event log and a manifest) as JSON lines",
        description='One event a line in event-id order, then a {"manifest": ...} line '
        "(counts per event type, first and last event time, SHA-256 of the event lines, "
        "a hash chain). Vectors are not exported: the target's model makes them again.",
    )
    export.add_argument(
        "--tenant", default=DEMO_TENANT, help="the organization to export (default: demo)"
    )
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    _remote_arguments(export, "read the lake from")

    imp = sub.add_parser(
        "import",
        help="replay a lake stream into this store or, with --url, a runner or stack",
        description="The stream is checked whole against its manifest before anything is "
        "stored; a second import of it changes nothing. The projection is rebuilt from "
        "the imported events and the entries are embedded by the target's model.",
    )
    imp.add_argument("file", help="a stream `grandbo export` wrote ('-': standard input)")
    imp.add_argument(
        "--tenant",
        help=f"the organization to import into (default {DEMO_TENANT}; "
        "with --url, the admin key's)",
    )
    imp.add_argument(
        "--rename",
        action="store_true",
        help="the stream is another organization's: import it as --tenant's",
    )
    imp.add_argument(
        "--merge",
        action="store_true",
        help="the organization has memory of its own: add the stream's to it",
    )
    imp.add_argument(
        "--no-embed",
        action="store_true",
        help="locally, leave the vectors to `grandbo embed-pending` (default: embed now)",
    )
    imp.add_argument("--json", action="store_true", help="print the outcome as JSON")
    add_create_tenant(imp, "the import creates it in the local store")
    _remote_arguments(imp, "import through")


def _remote_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "--url", help=f"{verb} the signed admin API at this base URL instead of the local store"
    )
    parser.add_argument(
        "--keyring",
        help=f"with --url: a keyring file holding the admin key (default: the local "
        f"runner's <data-dir>/keyring.json; ${ADMIN_KEY_ENV}, one key's JSON, comes first)",
    )
    parser.add_argument("--key-id", help="with --url: the admin key's id (default <tenant>-admin)")


def _admin_key(args: argparse.Namespace, tenant: str | None) -> SigningKey:
    """The admin key a remote call signs with: $GRANDBO_ADMIN_KEY, else the keyring's."""
    given = os.environ.get(ADMIN_KEY_ENV)
    if given:
        try:
            return SigningKey.model_validate_json(given)
        except ValueError as exc:
            raise InvalidInputError(ADMIN_KEY_ENV, "must be one key's JSON") from exc
    path = Path(args.keyring) if args.keyring else keyring_path(settings_from(args))
    try:
        keyring = Keyring.from_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInputError("keyring", f"cannot read {path}: {exc.strerror}") from exc
    key_id = args.key_id or f"{tenant or DEMO_TENANT}-admin"
    try:
        return keyring.find(key_id, "admin")
    except GrandboError as exc:
        raise InvalidInputError("key-id", f"{path} has no admin key {key_id!r}") from exc


def _client(args: argparse.Namespace, tenant: str | None) -> AdminClient:
    key = _admin_key(args, tenant)
    if tenant is not None and key.tenant_id != tenant:
        raise InvalidInputError(
            "tenant", f"the admin key {key.key_id!r} is organization {key.tenant_id!r}'s"
        )
    try:
        return AdminClient(args.url, key, timeout=60.0)
    except ValueError as exc:
        raise InvalidInputError("url", str(exc)) from exc


@contextmanager
def _output(path: str | None) -> Iterator[Callable[[str], None]]:
    """Lines to a file that appears whole or not at all (written beside it, then renamed)."""
    if path is None:

        def to_stdout(line: str) -> None:
            sys.stdout.write(line + "\n")

        yield to_stdout
        return
    target = Path(path)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed into place below
        "w", encoding="utf-8", dir=target.parent or ".", prefix=f".{target.name}.", delete=False
    )
    try:
        with handle:

            def to_file(line: str) -> None:
                handle.write(line + "\n")

            yield to_file
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


@contextmanager
def _refusals() -> Iterator[None]:
    """The API's refusal of bad input as the command line's own (exit code 2)."""
    try:
        yield
    except GrandboHTTPError as exc:
        if exc.status in (400, 422):
            field = str(exc.body.get("field") or "request")
            raise InvalidInputError(field, str(exc.body.get("message", exc))) from exc
        raise GrandboError(str(exc)) from exc


def cmd_export(args: argparse.Namespace) -> int:
    with _refusals(), _output(args.output) as write_line:
        if args.url:
            manifest = _client(args, args.tenant).export_lake(write_line)
        else:
            settings = settings_from(args)
            with open_service(settings) as service:
                require_named_organization(args, settings, service.repository.tenant_ids())
                manifest = LakeTransfer(service).export(args.tenant, write_line)
    print(
        f"exported {manifest.count} events of {manifest.tenant_id} "
        f"({json.dumps(manifest.event_types)}), sha256 {manifest.sha256}",
        file=sys.stderr,
    )
    return 0


def _read(path: str) -> LakeStream:
    if path == "-":
        return read_stream(sys.stdin, source="file")
    try:
        with open(path, encoding="utf-8") as handle:
            return read_stream(handle, source="file")
    except OSError as exc:
        raise InvalidInputError("file", f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError("file", f"{path} is not UTF-8 text") from exc


def cmd_import(args: argparse.Namespace) -> int:
    stream = _read(args.file)  # proven whole before anything is sent or stored
    if args.url and args.create_tenant:
        raise InvalidInputError(
            "create-tenant",
            "is for the local store: through --url the admin key's organization is imported",
        )
    if args.url:
        with _refusals():
            answer = _client(args, args.tenant).import_lake(
                stream, rename=args.rename, merge=args.merge
            )
        awaiting = f"; {answer['entries_awaiting_vectors']} entries await their vectors"
    else:
        tenant = args.tenant or DEMO_TENANT
        settings = settings_from(args)
        with open_service(settings) as service:
            require_organization(
                tenant,
                keyring=keyring_path(settings),
                in_store=service.repository.tenant_ids(),
                can_create=True,
                create=args.create_tenant,
            )
            outcome = LakeTransfer(service).import_stream(
                tenant,
                stream,
                rename=args.rename,
                merge=args.merge,
                progress=terminal_progress("importing", "batch"),
            )
            answer = outcome.as_dict()
            embedded = (
                0
                if args.no_embed
                else service.embed_pending(tenant, progress=terminal_progress("embedding", "batch"))
            )
        awaiting = (
            f"; {embedded} embedded with the local model"
            if not args.no_embed
            else f"; {answer['entries_awaiting_vectors']} entries await `grandbo embed-pending`"
        )
    if args.json:
        print(json.dumps(answer, indent=2, default=str))
        return 0
    print(
        f"imported {stream.manifest.count} events of {stream.tenant_id} into "
        f"{answer['tenant_id']}: {answer['inserted']} new, {answer['present']} already there; "
        f"{answer['entries']} entries, projection "
        f"{'rebuilt' if answer['projection_rebuilt'] else 'unchanged'}{awaiting}"
    )
    return 0
