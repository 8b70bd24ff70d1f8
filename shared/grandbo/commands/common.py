"""What several `grandbo` commands share: settings from the command line, the local
keyring's path, a query result printed for a person."""

from __future__ import annotations

import argparse
from pathlib import Path

from grandbo.local.settings import Settings
from grandbo.memory.models import MemoryQueryResult


def settings_from(args: argparse.Namespace) -> Settings:
    settings = Settings.from_env()
    updates: dict[str, object] = {}
    if getattr(args, "provider", None):
        updates["provider"] = args.provider
    if getattr(args, "data_dir", None):
        updates["data_dir"] = Path(args.data_dir)
    return settings.model_copy(update=updates)


def keyring_path(settings: Settings) -> Path:
    return settings.data_dir / "keyring.json"


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
        print(
            f"\n{rank}. {hit.title}  [{sure}{hit.service or 'no service'}, "
            f"{hit.origin.value}{corrected}, "
            f"{hit.age_days:.0f} days old]"
        )
        print(
            f"   why: lexical {lexical}, vector {vector}, fused {why.fused_score:.4f}"
            + (f"; shared tags: {', '.join(why.shared_tags[:8])}" if why.shared_tags else "")
        )
        summary = hit.summary if len(hit.summary) <= 300 else hit.summary[:297] + "..."
        print(f"   {summary}")
        if hit.staleness is not None:
            print(f"   {hit.staleness.note}")
    print(f"\n{result.notice}")


class StopServingError(Exception):
    """Raised in the main thread by SIGTERM to leave a command's serving loop, so the
    command's own clean-up (the embedded PostgreSQL it started) runs on the way out."""


def stop_serving(signum: int, frame: object) -> None:
    raise StopServingError
