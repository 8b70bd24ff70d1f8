"""`grandbo`: the operator's command line over the same service the Lambdas use."""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from grandbo.agent import command as agent_command
from grandbo.api.request_body import BodyProblem, parse_json_object
from grandbo.commands import audit as audit_command
from grandbo.commands import calibrate as calibrate_command
from grandbo.commands import console as console_command
from grandbo.commands import lake as lake_command
from grandbo.commands import people as people_command
from grandbo.commands import redaction as redaction_command
from grandbo.commands import retrievals as retrievals_command
from grandbo.commands import smoke as smoke_command
from grandbo.commands.common import (
    add_create_tenant,
    keyring_path,
    print_result,
    require_named_organization,
    settings_from,
)
from grandbo.commands.progress import terminal_progress
from grandbo.commands.serve import cmd_serve
from grandbo.embedding.rerank import reranker_named
from grandbo.errors import GrandboError, InvalidInputError, invalid_input_from
from grandbo.local.bootstrap import open_service
from grandbo.local.demo import DEMO_TENANT
from grandbo.local.serving import api_url
from grandbo.memory.domain.idempotency import KeySpace, caller_key, idempotency_key
from grandbo.memory.domain.models import WriteContext, WriteOutcome
from grandbo.memory.repository.vector_indexes import HNSW_MIN_ENTRIES
from grandbo.memory.service import MemoryService
from grandbo.topology.service import TopologyService


def default_actor() -> str:
    """The operating-system user running the command, as the events' actor."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a bare container)
        user = f"uid-{os.getuid()}"
    return f"cli:{user}"


def _context(args: argparse.Namespace, *operation: str) -> WriteContext:
    """The write's actor and key: the caller's key, or a fresh one, within the operation
    (and its entry), so one key reused for another command never answers for it."""
    given = args.idempotency_key
    own = str(uuid.uuid4()) if given is None else caller_key(given, "idempotency_key")
    # a bad --actor is a ValidationError, worded by `main` like every invalid input
    return WriteContext(
        actor=args.actor, idempotency_key=idempotency_key(KeySpace.CLI, *operation, own)
    )


def _print_outcome(outcome: WriteOutcome, as_json: bool = False) -> None:
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


def cmd_migrate(args: argparse.Namespace) -> int:
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.migrations import migrate

    applied = migrate(resolve_urls(settings_from(args)).admin)
    print(
        f"applied {len(applied)} migration(s)"
        + "".join(f"\n  {m.version:04d}_{m.name}" for m in applied)
    )
    return 0


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
    _print_outcome(service.record_entry(args.tenant, entry, _context(args, "add")), args.json)
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
        _context(args, "correct", str(args.entry_id)),
        expected_revision=args.expected_revision,
    )
    _print_outcome(outcome, args.json)
    return 0


def cmd_retire(args: argparse.Namespace, service: MemoryService) -> int:
    outcome = service.retire_entry(
        args.tenant,
        args.entry_id,
        args.reason,
        _context(args, "retire", str(args.entry_id)),
        superseded_by=args.superseded_by,
    )
    _print_outcome(outcome, args.json)
    return 0


def cmd_redact(args: argparse.Namespace, service: MemoryService) -> int:
    context = _context(args, "redact", str(args.entry_id))
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
        print(json.dumps(topology.record(args.tenant, batch, sync=args.sync)))
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


def cmd_token(args: argparse.Namespace) -> int:
    from grandbo.api.auth import mint_query_token
    from grandbo.local.runner import local_keyring

    keyring = local_keyring(keyring_path(settings_from(args)), DEMO_TENANT)
    print(mint_query_token(keyring.find(args.key_id, "query"), ttl_s=args.ttl))
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    from grandbo.api.auth import sign_admin_request
    from grandbo.local.runner import local_keyring

    keyring = local_keyring(keyring_path(settings_from(args)), DEMO_TENANT)
    body = (args.body or "").encode()
    headers = sign_admin_request(
        keyring.find(args.key_id, "admin"),
        args.method,
        args.path,
        body,
        idempotency_key=args.idempotency_key,
    )
    flags = " ".join(f"-H {shlex.quote(f'{name}: {value}')}" for name, value in headers.items())
    if not args.curl:
        print(flags)
        return 0
    command = [
        "curl -s",
        f"-X {shlex.quote(args.method.upper())}",
        shlex.quote(api_url(settings_from(args).data_dir, args.url).rstrip("/") + args.path),
        "-H 'Content-Type: application/json'",
        flags,
        *([f"--data-binary {shlex.quote(args.body)}"] if args.body else []),
    ]
    print(" ".join(command))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from grandbo.evaluation import format_table, run_eval

    settings = settings_from(args)
    scratch: Path | None = None
    if not settings.database_url and not args.data_dir:
        # a throwaway embedded server: events are append-only, eval tenants must not linger
        scratch = Path(tempfile.mkdtemp(prefix="grandbo-eval-"))
        settings = settings.model_copy(update={"data_dir": scratch})
    try:
        with open_service(settings) as service:
            if args.no_consolidation:  # the baseline: every document its own entry and hit
                service.provider.duplicate_distance = None
            if args.reranker:  # needs AWS credentials; fails open (and says so) without
                service.reranker = reranker_named(args.reranker)
            if args.no_answer:
                from grandbo.evaluation_no_answer import format_no_answer, run_no_answer_eval

                report, samples = run_no_answer_eval(
                    service,
                    Path(args.folder),
                    args.task,
                    min_confidence=args.min_confidence,
                    topic_words=args.topic_words,
                    progress=terminal_progress,
                )
                if args.samples:
                    Path(args.samples).write_text(json.dumps(samples.as_dict()) + "\n")
                    print(f"candidates' features written to {args.samples}")
                print(format_no_answer(report))
                if args.json:
                    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
                    print(f"JSON report written to {args.json}")
                return 0
            if args.replay:
                from grandbo.replay import run_replay

                report = run_replay(
                    service, Path(args.folder), task=args.task, progress=terminal_progress
                )
            else:
                report = run_eval(
                    service,
                    Path(args.folder),
                    args.task,
                    cutoffs=args.sweep or (),
                    ignore_own=args.ignore_own,
                    progress=terminal_progress,
                    calibrate=args.calibrate,
                )
    finally:
        if scratch is not None:
            from grandbo.local.postgres import stop_embedded_postgres

            stop_embedded_postgres(scratch)
            shutil.rmtree(scratch, ignore_errors=True)
    print(format_table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"JSON report written to {args.json}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grandbo", description=__doc__)
    parser.add_argument("--data-dir", help="embedded PostgreSQL location (default .grandbo)")
    parser.add_argument(
        "--provider",
        choices=["local", "titan", "fake"],
        help="embedding provider (default: local, or GRANDBO_EMBEDDING_PROVIDER)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log more, and show a failure's trace"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("migrate", help="apply pending schema migrations")

    def writer(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--tenant", default=DEMO_TENANT, help="the organization")
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

    redaction_command.add_parsers(sub, writer)

    purge = sub.add_parser(
        "purge-organization",
        help="delete every row of an organization, events and topology included",
    )
    purge.add_argument("--tenant", required=True, help="the organization to delete")
    purge.add_argument("--confirm", required=True, help="the organization's id, again")

    query = sub.add_parser("query", help="query_org_memory: have we seen this before?")
    query.add_argument("topic", help="a sentence: symptom, suspected mechanism and component")
    query.add_argument("--tenant", default=DEMO_TENANT, help="the organization")
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

    embed = sub.add_parser("embed-pending", help="embed entries lacking a current vector")
    embed.add_argument("--tenant", help="one tenant (default: every tenant)")
    embed.add_argument("--json", action="store_true", help="print the outcome as JSON")

    rebuild = sub.add_parser("rebuild", help="rebuild the projection from the events")
    rebuild.add_argument("--tenant", default=DEMO_TENANT, help="the organization")
    rebuild.add_argument("--verify", action="store_true", help="verify after rebuilding")
    rebuild.add_argument(
        "--verify-only",
        action="store_true",
        help="compare the replay with the live projection, change nothing",
    )
    rebuild.add_argument("--json", action="store_true", help="print the outcome as JSON")

    sub.add_parser("demo", help="seed the demo organization and answer a first query")

    topo = sub.add_parser("topology", help="the knowledge-graph tier")
    topo_sub = topo.add_subparsers(dest="topology_command", required=True)
    load = topo_sub.add_parser("load", help="upsert a JSON batch {namespace, nodes, edges}")
    load.add_argument("file", help="a JSON file: {namespace, nodes, edges}")
    load.add_argument(
        "--sync",
        action="store_true",
        help="the batch is the whole namespace: invalidate what it lacks",
    )
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
    topo.add_argument("--tenant", default=DEMO_TENANT, help="the organization")
    for p in topo_sub.choices.values():
        # before or after the subcommand: a default here would undo one given before it
        p.add_argument("--tenant", default=argparse.SUPPRESS, help="the organization")

    srv = sub.add_parser("serve", help="run every Lambda locally over HTTP (the local runner)")
    srv.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (loopback unless said)"
    )
    srv.add_argument("--port", type=int, default=8787, help="the API's port")
    srv.add_argument(
        "--containers",
        type=int,
        default=4,
        help="requests served at once, each with its own database connection (default 4: "
        "on 2 cores more only adds contention, docs/BENCHMARKS.md)",
    )
    srv.add_argument(
        "--console-port",
        type=int,
        default=8790,
        help="the curation console's port on 127.0.0.1 (0: any free port)",
    )
    srv.add_argument(
        "--no-console",
        dest="console_port",
        action="store_const",
        const=None,
        help="serve the API only",
    )

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

    idx = sub.add_parser("index", help="HNSW indexes for tenants past a size threshold")
    idx.add_argument(
        "--min-entries",
        type=int,
        default=HNSW_MIN_ENTRIES,
        help="an organization with this many active entries gets its own HNSW index",
    )

    tok = sub.add_parser("token", help="mint a query token from the local keyring")
    tok.add_argument(
        "--key-id",
        default=f"{DEMO_TENANT}-beacon",
        help="the query key of the keyring to mint with",
    )
    tok.add_argument("--ttl", type=int, default=3600, help="seconds the token is good for")

    sig = sub.add_parser(
        "sign",
        help="curl headers that sign one admin request (--curl: the whole command)",
        description="Signs one admin request with a key of the local keyring: the "
        "signature covers the method, the path, the exact body and the Idempotency-Key, "
        "and is good once, for 5 minutes. Example: grandbo sign POST /v1/admin/entries "
        '--body \'{"title": "...", "summary": "..."}\' --curl | sh',
    )
    sig.add_argument("method", help="the HTTP method, e.g. POST or GET")
    sig.add_argument("path", help="path after the base URL, e.g. /v1/admin/entries")
    sig.add_argument("--body", help="the exact JSON body that will be sent")
    sig.add_argument("--key-id", default=f"{DEMO_TENANT}-admin", help="the admin key to sign with")
    sig.add_argument("--idempotency-key", help="the Idempotency-Key header to send (signed)")
    sig.add_argument(
        "--curl", action="store_true", help="print a whole curl command, not only the headers"
    )
    sig.add_argument(
        "--url",
        default=None,
        help="the base URL the --curl command calls (default: the local runner serving "
        "this data directory, where it serves; else http://127.0.0.1:8787)",
    )

    ev = sub.add_parser("eval", help="retrieval quality on a BEIR-format folder")
    ev.add_argument("folder", help="a BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/)")
    ev.add_argument("--task", default="symptom", help="the qrels file to score: qrels/TASK.tsv")
    ev.add_argument("--json", help="also write the report as JSON to this file")
    ev.add_argument(
        "--sweep",
        type=float,
        action="append",
        help="also score hybrid at this vector cutoff (repeatable)",
    )
    ev.add_argument(
        "--ignore-own",
        choices=("auto", "yes", "no"),
        default="auto",
        help="ignore the corpus document that is the query itself (auto: unless the "
        "qrels name it relevant)",
    )
    ev.add_argument(
        "--calibrate",
        action="store_true",
        help="also report the cutoff `grandbo calibrate` derives from the corpus (no labels)",
    )
    ev.add_argument(
        "--replay",
        action="store_true",
        help="replay the incidents in date order, each query seeing only earlier ones "
        "(the task's queries name their own incident; relevant: earlier incidents "
        "sharing a root-cause label)",
    )
    ev.add_argument(
        "--reranker",
        help="hybrid reranked by this reranker ('bedrock:<model ARN>', AWS credentials "
        "needed; without them every query serves the fused order and the report says so)",
    )
    ev.add_argument(
        "--no-answer",
        action="store_true",
        help="remove the relevant documents of half the queries (by a hash of their id) "
        "and report what memory answers them: hits, confidence AUROC and calibration "
        "beside today's fused five (docs/EVAL.md)",
    )
    ev.add_argument(
        "--min-confidence",
        type=float,
        help="with --no-answer: the floor to measure (default: the model's)",
    )
    ev.add_argument(
        "--topic-words",
        type=int,
        help="with --no-answer: cut every query to its first N words (a Beacon topic is ~12)",
    )
    ev.add_argument(
        "--samples",
        help="with --no-answer: also write every candidate's features and label here "
        "(what `python -m bench.confidence_fit` fits a model from)",
    )
    ev.add_argument(
        "--no-consolidation",
        action="store_true",
        help="merge no recurrences and collapse no hits (the before of docs/EVAL.md)",
    )
    return parser


def cmd_audit(args: argparse.Namespace, service: MemoryService) -> int:
    return audit_command.cmd_audit(args, service, settings_from(args))


_SERVICE_COMMANDS = {
    "add": cmd_add,
    "correct": cmd_correct,
    "retire": cmd_retire,
    "redact": cmd_redact,
    "purge-organization": cmd_purge_organization,
    "query": cmd_query,
    "embed-pending": cmd_embed_pending,
    "rebuild": cmd_rebuild,
    "demo": cmd_demo,
    "topology": cmd_topology,
    "audit": cmd_audit,
    "calibrate": calibrate_command.cmd_calibrate,
    "retrievals": retrievals_command.cmd_retrievals,
}


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


def cmd_mcp(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    return agent_command.cmd_mcp(args, settings, keyring_path(settings))


def cmd_rewrite_redacted(args: argparse.Namespace) -> int:
    return redaction_command.cmd_rewrite_redacted(args, settings_from(args))


def cmd_smoke(args: argparse.Namespace) -> int:
    return smoke_command.cmd_smoke(args, settings_from(args))


def cmd_serving(args: argparse.Namespace) -> int:
    from grandbo.local.serving import console_url

    data_dir = settings_from(args).data_dir
    print(console_url(data_dir, None) if args.console else api_url(data_dir, None))
    return 0


def cmd_openapi(args: argparse.Namespace) -> int:
    from grandbo.openapi import openapi_json

    sys.stdout.write(openapi_json())
    return 0


_STANDALONE_COMMANDS = {
    "openapi": cmd_openapi,
    "serving": cmd_serving,
    "index": cmd_index,
    "eval": cmd_eval,
    "serve": cmd_serve,
    "console": console_command.cmd_console,
    "people": people_command.cmd_people,
    "token": cmd_token,
    "sign": cmd_sign,
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
        if args.command == "migrate":
            return cmd_migrate(args)
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
