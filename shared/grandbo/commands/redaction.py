"""`grandbo redact` (an entry's text removed for good, asked twice on a terminal) and
`grandbo rewrite-redacted` (the table files written anew so the removed bytes are gone:
`grandbo.memory.repository.table_rewrite`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from uuid import UUID

from grandbo.commands.common import require_named_organization
from grandbo.errors import GrandboError
from grandbo.local.settings import Settings
from grandbo.memory.domain.models import WriteContext
from grandbo.memory.repository.table_rewrite import Rewrite, plan_rewrite, rewrite_redacted
from grandbo.memory.service import MemoryService

REWRITE_COMMAND = "grandbo rewrite-redacted"


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    writer: Callable[[str, str], argparse.ArgumentParser],
) -> None:
    redact = writer("redact", "remove an entry's text for good (a tombstone stays)")
    redact.add_argument("entry_id", type=UUID, help="the entry to redact")
    redact.add_argument("--reason", required=True, help="why (kept in the tombstone)")
    redact.add_argument(
        "--keep-recurrences",
        action="store_true",
        help="the entries merged into it stay (resurfaced as an entry of their own)",
    )
    redact.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="TEXT",
        help="a string to remove besides the text, in every spelling, from the logged "
        "questions and verdicts' notes (a short code, a passphrase; repeat for more)",
    )
    redact.add_argument(
        "--yes", action="store_true", help="do not ask for confirmation (for scripts)"
    )

    rewrite = sub.add_parser(
        "rewrite-redacted",
        help="rewrite the tables a redaction left the removed text's bytes in (VACUUM FULL)",
        description="After a redaction the text is gone from every read, but its bytes stay "
        "in the table files until they are rewritten. This rewrites the organization's "
        "entries partition, the tag postings and tag statistics, the retrieval log and its "
        "spellings (VACUUM FULL: each locked "
        "while it is rewritten) and prunes the event log (VACUUM: no lock), as the schema "
        "owner. Run it in a quiet hour; what still holds the text after it (the WAL, "
        "backups) is in docs/OPERATIONS.md.",
    )
    rewrite.add_argument(
        "--tenant", help="the organization whose entries partition to rewrite (default: all)"
    )
    rewrite.add_argument(
        "--yes", action="store_true", help="do not ask for confirmation (for scripts)"
    )


def _confirmed(question: str, yes: bool) -> bool:
    """Asked on a terminal unless `--yes`; refused (not asked) when stdin is no terminal."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise GrandboError(f"{question} Not on a terminal: say --yes to go on without asking")
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


def cmd_redact(
    args: argparse.Namespace, service: MemoryService, context: WriteContext, as_json: bool
) -> int:
    if not _confirmed(
        f"Redact entry {args.entry_id} of {args.tenant} for good "
        f"({'its recurrences kept' if args.keep_recurrences else 'with its recurrences'})?",
        args.yes,
    ):
        print("nothing redacted", file=sys.stderr)
        return 1
    outcome = service.redact_entry(
        args.tenant,
        args.entry_id,
        args.reason,
        context,
        keep_recurrences=args.keep_recurrences,
        also=args.also,
    )
    if as_json:
        print(outcome.model_dump_json(indent=2))
        return 0
    verb = "redacted" if outcome.applied else "already redacted (the same request)"
    print(f"{verb}: {', '.join(str(e) for e in outcome.entries)}")
    print(f"  {len(outcome.removed)} event payload(s) removed; reason: {outcome.tombstone.reason}")
    if outcome.rewrite_pending:
        print(f"  {outcome.rewrite_note}")
    return 0


def cmd_rewrite_redacted(args: argparse.Namespace, settings: Settings) -> int:
    from grandbo.local.bootstrap import resolve_urls

    require_named_organization(args, settings)  # a --tenant that exists, or none: all
    admin = resolve_urls(settings).admin
    plan = plan_rewrite(admin, args.tenant)
    print("the rewrite goes over, one table at a time:\n" + plan.describe())
    if not _confirmed("Rewrite them now?", args.yes):
        print("nothing rewritten", file=sys.stderr)
        return 1

    def report(step: Rewrite) -> None:
        print(
            f"{step.how} {step.table}: {step.bytes_before / 1e6:.1f} -> "
            f"{step.bytes_after / 1e6:.1f} MB in {step.seconds:.2f} s",
            flush=True,
        )

    rewrite_redacted(admin, plan, report)
    print(
        "done: the redacted text's bytes are out of these tables' files; the write-ahead "
        "log keeps them until its segments are recycled, backups until they expire"
    )
    return 0
