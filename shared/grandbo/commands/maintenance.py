"""`grandbo migrate|embed-pending|rebuild|demo|index`: the store's upkeep: migrations,
missing vectors, the projection rebuilt from the events (and verified), the demo seeded,
HNSW indexes for organizations past the threshold."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from typing import Any

from grandbo.commands.common import print_result, settings_from
from grandbo.commands.progress import terminal_progress
from grandbo.local.demo import DEMO_TENANT
from grandbo.memory.repository.vector_indexes import HNSW_MIN_ENTRIES
from grandbo.memory.service import MemoryService


def add_migrate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("migrate", help="apply pending schema migrations")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`embed-pending`, `rebuild` and `demo`."""
    embed = sub.add_parser("embed-pending", help="embed entries lacking a current vector")
    embed.add_argument("--tenant", help="one tenant (default: every tenant)")
    embed.add_argument("--json", action="store_true", help="print the outcome as JSON")

    rebuild = sub.add_parser("rebuild", help="rebuild the projection from the events")
    rebuild.add_argument("--tenant", default=DEMO_TENANT, help="the organization (default: demo)")
    rebuild.add_argument("--verify", action="store_true", help="verify after rebuilding")
    rebuild.add_argument(
        "--verify-only",
        action="store_true",
        help="compare the replay with the live projection, change nothing",
    )
    rebuild.add_argument("--json", action="store_true", help="print the outcome as JSON")

    sub.add_parser("demo", help="seed the demo organization and answer a first query")


def add_index_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    idx = sub.add_parser("index", help="HNSW indexes for tenants past a size threshold")
    idx.add_argument(
        "--min-entries",
        type=int,
        default=HNSW_MIN_ENTRIES,
        help="an organization with this many active entries gets its own HNSW index",
    )


def cmd_migrate(args: argparse.Namespace) -> int:
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.migrations import migrate

    applied = migrate(resolve_urls(settings_from(args)).admin)
    print(
        f"applied {len(applied)} migration(s)"
        + "".join(f"\n  {m.version:04d}_{m.name}" for m in applied)
    )
    return 0


def cmd_embed_pending(args: argparse.Namespace, service: MemoryService) -> int:
    stored = service.embed_pending(args.tenant, progress=terminal_progress("embedding", "batch"))
    if args.json:
        print(json.dumps({"stored": stored, "embed_rev": service.provider.embed_rev}))
        return 0
    print(f"stored {stored} embedding(s) with {service.provider.embed_rev}")
    return 0


def _phases(*phases: tuple[str, str]) -> Callable[[Iterable[Any], int], Iterable[Any]]:
    """A bar per long step, in the order the steps come (`grandbo rebuild`'s fold, then
    its writes): each call takes the next step's description and unit."""
    steps = iter(phases)

    def wrap(items: Iterable[Any], total: int) -> Iterable[Any]:
        description, unit = next(steps, ("working", "item"))
        return terminal_progress(description, unit)(items, total)

    return wrap


def cmd_rebuild(args: argparse.Namespace, service: MemoryService) -> int:
    """The projection from the events; with the topology tier, the learned graph
    completed from the entry events' (incident, service) pairs. `--verify` compares both."""
    repository = service.repository
    said: dict[str, object] = {"tenant_id": args.tenant}
    lines: list[str] = []
    if not args.verify_only:
        rebuilt = repository.rebuild_projection(
            args.tenant, progress=_phases(("folding the events", "event"), ("writing", "entry"))
        )
        said |= {"rebuilt": {"entries": rebuilt.entries, "events": rebuilt.events}}
        said["left_out"] = rebuilt.unreplayable
        lines.append(
            f"rebuilt {rebuilt.entries} entries of {args.tenant} from {rebuilt.events} events"
        )
        lines += [f"LEFT OUT {line}" for line in rebuilt.unreplayable]
        learned = service.rebuild_learned_graph(args.tenant)
        if learned is not None:
            said["learned_graph"] = learned
            lines.append(
                f"learned graph: {learned.get('affects_created', 0)} AFFECTS edge(s) added "
                "from the events"
            )
    mismatches: list[str] = []
    if args.verify or args.verify_only:
        report = repository.verify_projection(args.tenant)
        lines += [f"LEFT OUT {line}" for line in report.unreplayable]
        lines += [f"MISMATCH {line}" for line in report.mismatches]
        status = "equals" if not report.mismatches else "DIFFERS FROM"
        lines.append(
            f"{report.tenant_id}: the projection {status} the replay of {report.events} events "
            f"({report.entries} entries)"
        )
        mismatches = [*report.mismatches, *report.unreplayable]
        said |= {"left_out": report.unreplayable, "mismatches": list(report.mismatches)}
        graph = service.verify_learned_graph(args.tenant)
        if graph is not None:
            pairs, drift = graph
            lines += [f"MISMATCH {line}" for line in drift]
            agrees = "agrees with" if not drift else "DIFFERS FROM"
            lines.append(
                f"{report.tenant_id}: the learned graph {agrees} the {pairs} (incident, "
                "service) pairs of the events"
            )
            said["learned_graph_drift"] = drift
            mismatches += drift
    said["verified"] = not mismatches
    print(json.dumps(said, indent=2) if args.json else "\n".join(lines))
    return 0 if not mismatches else 1


def cmd_demo(args: argparse.Namespace, service: MemoryService) -> int:
    from grandbo.local.demo import DEMO_TOPIC, seed_demo

    created = seed_demo(service, DEMO_TENANT)  # each write embedded as it is made
    service.embed_pending(DEMO_TENANT)  # and what an earlier run left without a vector
    waiting = len(service.pending_jobs(DEMO_TENANT))
    embedded = "all embedded" if not waiting else f"{waiting} awaiting a vector"
    print(f"demo organization '{DEMO_TENANT}': {created} new entries, {embedded}")
    print(f"\n$ grandbo query --tenant {DEMO_TENANT} {json.dumps(DEMO_TOPIC)}\n")
    print_result(service.query_org_memory(DEMO_TENANT, DEMO_TOPIC), as_json=False)
    print(
        f'\nTry your own: .venv/bin/grandbo query --tenant {DEMO_TENANT} "<a sentence '
        'describing the symptom, suspected mechanism and component>"'
    )
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes

    created = ensure_hnsw_indexes(
        resolve_urls(settings_from(args)).admin,
        args.min_entries,
        progress=terminal_progress("indexing", "tenant"),
    )
    print(
        f"created HNSW index(es) for {len(created)} tenant(s)"
        + "".join(f"\n  {tenant}" for tenant in created)
    )
    return 0
