"""`grandbo query`: `query_org_memory` from the command line, printed as the API answers it."""

from __future__ import annotations

import argparse
from datetime import datetime

from grandbo.commands.common import print_result
from grandbo.local.demo import DEMO_TENANT
from grandbo.memory.service import MemoryService


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    query = sub.add_parser("query", help="query_org_memory: have we seen this before?")
    query.add_argument("topic", help="a sentence: symptom, suspected mechanism and component")
    query.add_argument("--tenant", default=DEMO_TENANT, help="the organization (default: demo)")
    query.add_argument("--limit", type=int, default=5, help="at most this many hits (1-20)")
    query.add_argument("--service", help="only lessons about this service (or its scope)")
    query.add_argument(
        "--min-confidence",
        type=float,
        help="withhold hits under this confidence, 0-1 (default: the organization's floor)",
    )
    query.add_argument(
        "--scope",
        choices=("service", "blast_radius", "dependencies", "correlated"),
        help="with --service: widen through the topology or the learned graph",
    )
    query.add_argument(
        "--as-of",
        type=datetime.fromisoformat,
        help="read the scope and staleness from the topology of this moment (ISO 8601 "
        "with a time zone)",
    )
    query.add_argument("--json", action="store_true", help="print the whole answer as JSON")


def cmd_query(args: argparse.Namespace, service: MemoryService) -> int:
    # one question per process: the model is loaded before its deadline starts
    service.provider.warm_or_say()
    result = service.query_org_memory(
        args.tenant,
        args.topic,
        limit=args.limit,
        service=args.service,
        scope=args.scope,
        as_of=args.as_of,
        min_confidence=args.min_confidence,
    )
    print_result(result, as_json=args.json)
    return 0
