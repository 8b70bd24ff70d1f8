"""`grandbo topology load|blast-radius|criticality`: the knowledge-graph tier from the
command line (a batch read with the API's own body rules)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from grandbo.api.request_body import BodyProblem, parse_json_object
from grandbo.commands.common import add_create_tenant
from grandbo.errors import InvalidInputError
from grandbo.local.demo import DEMO_TENANT
from grandbo.memory.service import MemoryService
from grandbo.topology.service import TopologyService


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topo = sub.add_parser("topology", help="the knowledge-graph tier")
    topo_sub = topo.add_subparsers(dest="topology_command", required=True)
    load = topo_sub.add_parser("load", help="upsert a JSON batch {namespace, nodes, edges}")
    load.add_argument("file", help="a JSON file: {namespace, nodes, edges}")
    load.add_argument(
        "--sync",
        action="store_true",
        help="the batch is the whole namespace: invalidate what it lacks",
    )
    load.add_argument("--json", action="store_true", help="print the counts as JSON")
    add_create_tenant(load, "a team's first act may be loading its topology")
    for name in ("blast-radius", "criticality"):
        read = topo_sub.add_parser(name)
        read.add_argument("--type", default="Service", help="the node's type")
        read.add_argument("--id", required=True, help="the node's external id")
        read.add_argument("--as-of", type=datetime.fromisoformat, help="ISO 8601 with a time zone")
        read.add_argument(
            "--namespaces",
            choices=("topology", "learned", "both"),
            default="topology",
            help="dependencies, services that failed together in past incidents, or both",
        )
        if name == "blast-radius":
            read.add_argument("--hops", type=int, default=3, help="how far to walk")
    topo.add_argument("--tenant", default=DEMO_TENANT, help="the organization (default: demo)")
    for p in topo_sub.choices.values():
        # before or after the subcommand: a default here would undo one given before it
        p.add_argument("--tenant", default=argparse.SUPPRESS, help="the organization")


def _json_file(path: Path) -> dict[str, object]:
    """A file holding one JSON object, read with the API's own body rules."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError("file", f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError("file", f"{path} is not UTF-8 text") from exc
    parsed = parse_json_object(text)
    if isinstance(parsed, BodyProblem):
        raise InvalidInputError("file", f"{path}: {parsed}")
    return parsed


def cmd_topology(args: argparse.Namespace, service: MemoryService) -> int:
    topology = service.topology
    assert isinstance(topology, TopologyService)
    if args.topology_command == "load":
        batch = _json_file(Path(args.file))
        counts = topology.record(args.tenant, batch, sync=args.sync)
        if args.json:
            print(json.dumps(counts))
        else:
            said = ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items())
            print(f"topology of {args.tenant} loaded from {args.file}: {said or 'nothing'}")
    elif args.topology_command == "blast-radius":
        radius = topology.blast_radius(
            args.tenant,
            args.type,
            args.id,
            hops=args.hops,
            as_of=args.as_of,
            namespaces=args.namespaces,
        )
        print(radius.model_dump_json(indent=2))
    else:
        crit = topology.criticality(
            args.tenant, args.type, args.id, as_of=args.as_of, namespaces=args.namespaces
        )
        print(crit.model_dump_json(indent=2))
    return 0
