"""What several `grandbo` commands share: settings from the command line, the local
keyring's path, the organization `--tenant` names (it must exist, or `--create-tenant`
say it may be made: `grandbo.local.organizations`), a query result printed for a person."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path

from grandbo.errors import GrandboError
from grandbo.local.organizations import CREATE_TENANT, require_organization
from grandbo.local.settings import DEFAULT_DATA_DIR, Settings
from grandbo.memory.domain.models import MemoryQueryResult
from grandbo.text.rules import one_line, quoted


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings from the environment and the command line. The data directory, one
    rule (issue 53): `--data-dir`, else GRANDBO_DATA_DIR, else the nearest `.grandbo` with
    a store in it in the working directory or above, else `./.grandbo`; made absolute."""
    settings = Settings.from_env()
    updates: dict[str, object] = {}
    if getattr(args, "provider", None):
        updates["provider"] = args.provider
    if getattr(args, "data_dir", None):
        updates["data_dir"] = Path(args.data_dir)
    elif not os.environ.get("GRANDBO_DATA_DIR"):
        updates["data_dir"] = nearest_data_dir(Path.cwd())
    chosen = settings.model_copy(update=updates)
    return chosen.model_copy(update={"data_dir": chosen.data_dir.expanduser().absolute()})


def nearest_data_dir(start: Path) -> Path:
    """The nearest `.grandbo` holding a store, from `start` up to the root; else
    `start/.grandbo` (where a first `grandbo serve` makes one)."""
    for folder in (start, *start.parents):
        candidate = folder / DEFAULT_DATA_DIR
        if has_store(candidate):
            return candidate
    return start / DEFAULT_DATA_DIR


def require_store(settings: Settings) -> None:
    """A command that only reads: GrandboError naming the directory when there is no
    store to read (none is made for it)."""
    if settings.database_url or has_store(settings.data_dir):
        return
    raise GrandboError(
        f"no store in {settings.data_dir} (looked for the nearest .grandbo from "
        f"{Path.cwd()} up): start one with `make run` or `grandbo serve` there, or say "
        "where it is with --data-dir or GRANDBO_DATA_DIR"
    )


def has_store(data_dir: Path) -> bool:
    """Whether `data_dir` holds an embedded store (its server's data, whole)."""
    return (data_dir / "pgdata" / "PG_VERSION").exists()


def keyring_path(settings: Settings) -> Path:
    return settings.data_dir / "keyring.json"


def add_create_tenant(parser: argparse.ArgumentParser, what: str) -> None:
    """`--create-tenant`: the command may make the organization it names (`what` says how)."""
    parser.add_argument(
        CREATE_TENANT,
        action="store_true",
        help=f"the organization may be new: {what} (without it, an organization that does "
        "not exist is refused)",
    )


def require_named_organization(
    args: argparse.Namespace, settings: Settings, in_store: Iterable[str] | None = None
) -> None:
    """The organization `--tenant` names exists, or the command may make it and was told
    to (`--create-tenant`): else UnknownOrganizationError, before anything is read or
    written. A command without `--tenant`, or not given one where it means every
    organization, has nothing to check."""
    tenant = getattr(args, "tenant", None)
    if tenant is None:
        return
    require_organization(
        tenant,
        keyring=keyring_path(settings),
        in_store=in_store,
        settings=settings,
        can_create=hasattr(args, "create_tenant"),
        create=bool(getattr(args, "create_tenant", False)),
    )


def print_result(result: MemoryQueryResult, *, as_json: bool) -> None:
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    meta = result.metadata
    print(
        f"{len(result.hits)} hit(s); candidates: lexical {meta.lexical_candidates}, "
        f"vector {meta.vector_candidates} (vector leg {meta.vector_leg}); "
        f"{meta.active_entries_without_current_vector} of {meta.active_entries} active "
        "entries lack a current vector"
    )
    if meta.vector_leg_error and not meta.degraded:
        print(f"  vector leg: {meta.vector_leg_error}")
    if meta.message:
        print(f"  {meta.message}")
    for rank, hit in enumerate(result.hits, start=1):
        why = hit.why
        lexical = "-" if why.lexical_rank is None else f"#{why.lexical_rank}"
        vector = (
            "-" if why.vector_rank is None else f"#{why.vector_rank} d={why.vector_distance:.3f}"
        )
        sure = "" if hit.confidence is None else f"confidence {hit.confidence:.2f}, "
        corrected = " (corrected)" if hit.revision > 1 else ""
        # stored text is quoted, one line (JSON string escaping): a title or a lesson
        # cannot print a hit line, a confidence or "no precedent" of its own
        print(
            f"\n{rank}. {quoted(hit.title)}  [{sure}{hit.service or 'no service'}, "
            f"{hit.origin.value}{corrected}, "
            f"{hit.age_days:.0f} days old]"
        )
        print(
            f"   why: lexical {lexical}, vector {vector}, fused {why.fused_score:.4f}"
            + (f"; shared words: {', '.join(why.shared_words[:8])}" if why.shared_words else "")
        )
        print(f"   lesson: {quoted(hit.summary, 300)}")
        if hit.staleness is not None:
            print(f"   {one_line(hit.staleness.note)}")  # the server's sentence
    print(f"\n{result.notice}")


class StopServingError(Exception):
    """Raised in the main thread by SIGTERM to leave a command's serving loop, so the
    command's own clean-up (the embedded PostgreSQL it started) runs on the way out."""


def stop_serving(signum: int, frame: object) -> None:
    raise StopServingError
