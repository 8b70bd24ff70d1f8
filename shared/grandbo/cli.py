"""`grandbo`: the operator's command line over the same service the Lambdas use."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from pydantic import ValidationError

from grandbo.agent import command as agent_command
from grandbo.commands import audit as audit_command
from grandbo.commands import calibrate as calibrate_command
from grandbo.commands import console as console_command
from grandbo.commands import entries as entries_command
from grandbo.commands import evaluation as evaluation_command
from grandbo.commands import keys as keys_command
from grandbo.commands import lake as lake_command
from grandbo.commands import maintenance as maintenance_command
from grandbo.commands import people as people_command
from grandbo.commands import query as query_command
from grandbo.commands import redaction as redaction_command
from grandbo.commands import retrievals as retrievals_command
from grandbo.commands import serve as serve_command
from grandbo.commands import smoke as smoke_command
from grandbo.commands import topology as topology_command
from grandbo.commands.common import (
    keyring_path,
    require_named_organization,
    require_store,
    settings_from,
)
from grandbo.commands.entries import default_actor
from grandbo.errors import GrandboError, InvalidInputError, invalid_input_from
from grandbo.local.bootstrap import open_service
from grandbo.local.serving import api_url
from grandbo.memory.service import MemoryService

__all__ = ["build_parser", "default_actor", "main"]


# `grandbo --help` lists the commands in these groups (a test checks each is in one)
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "ask memory": ("query", "retrievals", "mcp", "eval"),
    "write": ("add", "correct", "retire", "topology", "import"),
    "curate": ("console", "audit", "calibrate", "people"),
    "run and operate": (
        "serve",
        "serving",
        "demo",
        "migrate",
        "embed-pending",
        "index",
        "rebuild",
        "export",
        "token",
        "sign",
        "smoke",
        "openapi",
    ),
    "dangerous (remove for good; each asks first)": (
        "redact",
        "rewrite-redacted",
        "purge-organization",
    ),
}
# commands that only read a store: where there is none they say where they looked,
# and make none
READ_ONLY_COMMANDS = frozenset({"query", "retrievals", "export", "audit", "calibrate"})


class _GroupedHelp(argparse.RawDescriptionHelpFormatter):
    """The commands listed by COMMAND_GROUPS in the epilog, not in one unsorted list."""

    def _format_action(self, action: argparse.Action) -> str:
        if isinstance(action, argparse._SubParsersAction):
            return ""
        return super()._format_action(action)


def _grouped(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> str:
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    lines = ["commands:"]
    for group, names in COMMAND_GROUPS.items():
        lines.append(f"  {group}:")
        lines += [f"    {name:<20} {helps.get(name, '')}" for name in names]
    lines.append("\n`grandbo COMMAND --help` says more of each.")
    return "\n".join(lines)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"grandbo {version('grandbo')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "grandbo (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """Every command, registered by its module under `grandbo.commands`, listed by
    `grandbo --help` in COMMAND_GROUPS."""
    parser = argparse.ArgumentParser(
        prog="grandbo", description=__doc__, formatter_class=_GroupedHelp
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "--data-dir",
        help="the local store's directory (default: GRANDBO_DATA_DIR, else the nearest "
        "`.grandbo` holding a store in this directory or above, else ./.grandbo)",
    )
    parser.add_argument(
        "--provider",
        choices=["local", "titan", "fake"],
        help="embedding provider (default: local, or GRANDBO_EMBEDDING_PROVIDER)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log more, and show a failure's trace"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    maintenance_command.add_migrate_parser(sub)
    writer = entries_command.add_parsers(sub)
    redaction_command.add_parsers(sub, writer)
    entries_command.add_purge_parser(sub)
    query_command.add_parser(sub)
    maintenance_command.add_parsers(sub)
    topology_command.add_parser(sub)
    serve_command.add_parser(sub)
    sub.add_parser("openapi", help="print the HTTP API's OpenAPI document")
    where = sub.add_parser(
        "serving",
        help="print where this data directory's runner serves its API (or --console), as "
        "`grandbo serve` recorded it; the default address when none runs",
    )
    where.add_argument("--console", action="store_true", help="the console's address")
    agent_command.add_parser(sub)
    audit_command.add_parser(sub)
    smoke_command.add_parser(sub)
    retrievals_command.add_parser(sub)
    console_command.add_parser(sub)
    people_command.add_parser(sub)
    calibrate_command.add_parser(sub)
    lake_command.add_parsers(sub)
    maintenance_command.add_index_parser(sub)
    keys_command.add_parsers(sub)
    evaluation_command.add_parser(sub)
    parser.epilog = _grouped(sub)
    return parser


def cmd_audit(args: argparse.Namespace, service: MemoryService) -> int:
    return audit_command.cmd_audit(args, service, settings_from(args))


def cmd_mcp(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    return agent_command.cmd_mcp(args, settings, keyring_path(settings))


def cmd_rewrite_redacted(args: argparse.Namespace) -> int:
    return redaction_command.cmd_rewrite_redacted(args, settings_from(args))


def cmd_smoke(args: argparse.Namespace) -> int:
    return smoke_command.cmd_smoke(args, settings_from(args))


def cmd_serving(args: argparse.Namespace) -> int:
    from grandbo.local.serving import console_url, default_note

    data_dir = settings_from(args).data_dir
    note = default_note(data_dir, None)
    if note:  # the default address, said to be one (a script reads stdout)
        print(f"grandbo serving: {note}", file=sys.stderr)
    print(console_url(data_dir, None) if args.console else api_url(data_dir, None))
    return 0


def cmd_openapi(args: argparse.Namespace) -> int:
    from grandbo.openapi import openapi_json

    sys.stdout.write(openapi_json())
    return 0


# commands run over the service (opened once, on the organization named)
_SERVICE_COMMANDS: dict[str, Callable[[argparse.Namespace, MemoryService], int]] = {
    "add": entries_command.cmd_add,
    "correct": entries_command.cmd_correct,
    "retire": entries_command.cmd_retire,
    "redact": entries_command.cmd_redact,
    "purge-organization": entries_command.cmd_purge_organization,
    "query": query_command.cmd_query,
    "embed-pending": maintenance_command.cmd_embed_pending,
    "rebuild": maintenance_command.cmd_rebuild,
    "demo": maintenance_command.cmd_demo,
    "topology": topology_command.cmd_topology,
    "audit": cmd_audit,
    "calibrate": calibrate_command.cmd_calibrate,
    "retrievals": retrievals_command.cmd_retrievals,
}

# commands that open what they need themselves
_STANDALONE_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "migrate": maintenance_command.cmd_migrate,
    "openapi": cmd_openapi,
    "serving": cmd_serving,
    "index": maintenance_command.cmd_index,
    "eval": evaluation_command.cmd_eval,
    "serve": serve_command.cmd_serve,
    "console": console_command.cmd_console,
    "people": people_command.cmd_people,
    "token": keys_command.cmd_token,
    "sign": keys_command.cmd_sign,
    "mcp": cmd_mcp,
    "export": lake_command.cmd_export,
    "import": lake_command.cmd_import,
    "rewrite-redacted": cmd_rewrite_redacted,
    "smoke": cmd_smoke,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        # (a command told to read a runner or a stack over --url reads no store here)
        if args.command in READ_ONLY_COMMANDS and not getattr(args, "url", None):
            require_store(settings_from(args))
        if args.command in _STANDALONE_COMMANDS:
            return _STANDALONE_COMMANDS[args.command](args)
        settings = settings_from(args)
        with open_service(settings, embed_writes=True) as service:
            require_named_organization(args, settings, service.repository.tenant_ids())
            return _SERVICE_COMMANDS[args.command](args, service)
    except (InvalidInputError, ValidationError) as exc:
        problem = exc if isinstance(exc, InvalidInputError) else invalid_input_from(exc)
        print(f"grandbo: invalid {problem.field}: {problem.message}", file=sys.stderr)
        return 2
    except GrandboError as exc:
        print(f"grandbo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`grandbo query ... | head`): end quietly, as `cat` does;
        # stdout pointed at /dev/null so the interpreter's last flush raises nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # every error is one line; --verbose shows the trace
        if args.verbose:
            raise
        print(f"grandbo: {type(exc).__name__}: {exc} (--verbose shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
