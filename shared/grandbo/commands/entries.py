"""`grandbo add|correct|retire|redact|purge-organization`: an entry's writes from the command
line, each an event under an idempotency key of the command's own (or `--idempotency-key`),
named by the user running it."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import uuid
from collections.abc import Callable
from uuid import UUID

from grandbo.commands import redaction as redaction_command
from grandbo.commands.common import add_create_tenant
from grandbo.errors import InvalidInputError
from grandbo.local.demo import DEMO_TENANT
from grandbo.memory.domain.idempotency import KeySpace, caller_key, idempotency_key
from grandbo.memory.domain.models import WriteContext, WriteOutcome
from grandbo.memory.service import MemoryService

Writer = Callable[[str, str], argparse.ArgumentParser]


def default_actor() -> str:
    """The operating-system user running the command, as the events' actor."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a bare container)
        user = f"uid-{os.getuid()}"
    return f"cli:{user}"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> Writer:
    """`add`, `correct` and `retire`; answers the maker of a writer's parser (its
    --tenant, --actor, --idempotency-key and --json), which the redaction's commands use too."""

    def writer(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--tenant", default=DEMO_TENANT, help="the organization (default: demo)")
        p.add_argument(
            "--actor",
            default=default_actor(),
            help="who is writing, recorded in the event (default: cli:<your user name>)",
        )
        p.add_argument(
            "--idempotency-key",
            help="a key of your own: the same command with it again changes nothing",
        )
        p.add_argument("--json", action="store_true", help="print the outcome as JSON")
        return p

    add = writer("add", "create an entry")
    add_create_tenant(add, "its first entry creates it")
    add.add_argument("--title", required=True, help="what was learned, in a few words")
    add.add_argument(
        "--summary",
        required=True,
        help="what happened, why, and what fixed it (a sentence or more)",
    )
    add.add_argument("--service", help="the service the lesson is about")
    add.add_argument(
        "--tag", action="append", help="a tag beyond the text's own words (repeat for more)"
    )
    add.add_argument(
        "--origin",
        choices=["admin", "incident"],
        default="admin",
        help="written by a person (admin) or from an incident's finding",
    )
    add.add_argument("--incident-id", help="the incident it was learned in")
    add.add_argument(
        "--kind",
        choices=["durable", "episodic"],
        default="durable",
        help="durable (kept) or episodic (served for the organization's lifetime, then retired)",
    )

    correct = writer("correct", "correct an entry's text (new revision, re-embedded)")
    correct.add_argument("entry_id", type=UUID, help="the entry to correct")
    correct.add_argument("--title", help="the new title (kept when not given)")
    correct.add_argument("--summary", help="the new summary (kept when not given)")
    service_change = correct.add_mutually_exclusive_group()
    service_change.add_argument("--service", help="the new service (kept when not given)")
    service_change.add_argument(
        "--no-service", action="store_true", help="the entry is about no service any more"
    )
    correct.add_argument(
        "--tag",
        action="append",
        help="a tag beyond the text's own (repeat; replaces the given tags; kept when none)",
    )
    correct.add_argument(
        "--expected-revision",
        type=int,
        help="refuse (409) unless the entry is at this revision (default: the one read)",
    )

    retire = writer("retire", "retire an entry (or mark it superseded)")
    retire.add_argument("entry_id", type=UUID, help="the entry to retire")
    retire.add_argument("--reason", required=True, help="why it is no longer served")
    retire.add_argument(
        "--superseded-by", type=UUID, help="the entry that says it better (takes its recurrences)"
    )
    return writer


def add_purge_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    purge = sub.add_parser(
        "purge-organization",
        help="delete every row of an organization, events and topology included",
    )
    purge.add_argument("--tenant", required=True, help="the organization to delete")
    purge.add_argument("--confirm", required=True, help="the organization's id, again")


def write_context(args: argparse.Namespace, *operation: str) -> WriteContext:
    """The write's actor and key: the caller's key, or a fresh one, within the operation
    (and its entry), so one key reused for another command never answers for it."""
    given = args.idempotency_key
    own = str(uuid.uuid4()) if given is None else caller_key(given, "idempotency_key")
    # a bad --actor is a ValidationError, worded by `main` like every invalid input
    return WriteContext(
        actor=args.actor, idempotency_key=idempotency_key(KeySpace.CLI, *operation, own)
    )


def print_outcome(outcome: WriteOutcome, as_json: bool = False) -> None:
    if as_json:
        print(outcome.model_dump_json(indent=2))
        return
    entry = outcome.entry
    verb = "recorded" if outcome.applied else "unchanged (idempotency key already used)"
    print(
        f"{verb}: {entry.entry_id} revision {entry.revision} [{entry.status.value}] {entry.title}"
    )
    if outcome.embed_enqueued is not None:
        # the command embeds its own writes (a running `grandbo serve` would not hear of
        # them): say whether the entry is searchable by meaning yet
        print(
            "embedded: searchable by meaning now"
            if outcome.embed_enqueued
            else "not embedded (the model failed; see above): run `grandbo embed-pending`"
        )


def cmd_add(args: argparse.Namespace, service: MemoryService) -> int:
    entry = {
        "title": args.title,
        "summary": args.summary,
        "service": args.service,
        "tags": args.tag or [],
        "origin": args.origin,
        "incident_id": args.incident_id,
        "kind": args.kind,
    }
    print_outcome(service.record_entry(args.tenant, entry, write_context(args, "add")), args.json)
    return 0


def cmd_correct(args: argparse.Namespace, service: MemoryService) -> int:
    # what it does not name it keeps (the service among them: --no-service clears it)
    named = {
        "title": args.title,
        "summary": args.summary,
        "service": args.service,
        "tags": args.tag,
    }
    text: dict[str, object] = {k: v for k, v in named.items() if v is not None}
    if args.no_service:
        text["service"] = None
    outcome = service.correct_entry(
        args.tenant,
        args.entry_id,
        text,
        write_context(args, "correct", str(args.entry_id)),
        expected_revision=args.expected_revision,
    )
    print_outcome(outcome, args.json)
    return 0


def cmd_retire(args: argparse.Namespace, service: MemoryService) -> int:
    outcome = service.retire_entry(
        args.tenant,
        args.entry_id,
        args.reason,
        write_context(args, "retire", str(args.entry_id)),
        superseded_by=args.superseded_by,
    )
    print_outcome(outcome, args.json)
    return 0


def cmd_redact(args: argparse.Namespace, service: MemoryService) -> int:
    context = write_context(args, "redact", str(args.entry_id))
    return redaction_command.cmd_redact(args, service, context, as_json=args.json)


def cmd_purge_organization(args: argparse.Namespace, service: MemoryService) -> int:
    """Every row of the organization deleted; `--confirm` must repeat its id."""
    if args.confirm != args.tenant:
        raise InvalidInputError(
            "confirm", f"must repeat the organization to purge ({args.tenant!r})"
        )
    print(
        json.dumps(
            {"organization": args.tenant, "deleted": service.purge_organization(args.tenant)},
            indent=2,
        )
    )
    return 0
