"""`grandbo retrievals --tenant T [--incident I] [--unanswered] [--limit N] [--json]`: the
retrieval log, newest first: what was asked of memory and what it answered."""

from __future__ import annotations

import argparse
import json

from grandbo.memory.domain.retrieval_log import retrieval_page
from grandbo.memory.service import MemoryService


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "retrievals",
        help="what was asked of memory and what it answered, newest first",
        description="The retrieval log: each query_org_memory with its caller, incident, "
        "topic, hits (ids, ranks, confidences) and latency.",
    )
    parser.add_argument("--tenant", required=True, help="the organization")
    parser.add_argument("--incident", help="one incident's questions only")
    parser.add_argument(
        "--unanswered",
        action="store_true",
        help="only the questions memory could not answer (no hit, or none confident)",
    )
    parser.add_argument("--limit", type=int, default=20, help="at most this many (1-200)")
    parser.add_argument("--json", action="store_true", help="print the page as JSON")


def cmd_retrievals(args: argparse.Namespace, service: MemoryService) -> int:
    page = retrieval_page(
        service.repository,
        args.tenant,
        incident_id=args.incident,
        unanswered=args.unanswered,
        limit=max(1, min(200, args.limit)),
    )
    if args.json:
        print(json.dumps(page.model_dump(mode="json"), indent=2))
        return 0
    if not page.retrievals:
        print("no retrievals")
    for r in page.retrievals:
        where = f" [{r.incident_id}]" if r.incident_id else ""
        state = "UNANSWERED " if r.unanswered else ""
        print(f"{r.at:%Y-%m-%d %H:%M:%S} {r.caller}{where} {state}({r.latency_ms:.0f} ms)")
        print(f"  asked: {json.dumps(r.topic)}")
        for hit in r.hits:
            confidence = "-" if hit.confidence is None else f"{hit.confidence:.2f}"
            print(f"  {hit.rank}. {hit.entry_id} confidence {confidence}")
    return 0
