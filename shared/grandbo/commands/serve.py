"""`grandbo serve`: every Lambda behind a local HTTP gateway, on the embedded store."""

from __future__ import annotations

import argparse
import json
import signal
import sys

from grandbo.commands.common import (
    StopServingError,
    keyring_path,
    print_result,
    settings_from,
    stop_serving,
)
from grandbo.local.demo import DEMO_TENANT


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        "--standby",
        action="store_true",
        help="also run a streaming standby of the embedded store (in DATA_DIR/standby) and "
        "answer questions from it, as Aurora's reader endpoint answers them in AWS",
    )
    srv.add_argument(
        "--no-console",
        dest="console_port",
        action="store_const",
        const=None,
        help="serve the API only",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    # quiet powertools outside Lambda: no EMF lines on stdout, warnings only
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "DEBUG" if args.verbose else "WARNING")
    from functions.embed_worker.handler import lambda_handler as embed_worker

    from grandbo.api.auth import mint_query_token, sign_admin_request
    from grandbo.embedding.factory import provider_named
    from grandbo.local import serving
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.local.demo import DEMO_TOPIC, seed_demo_once
    from grandbo.local.embed_queue import InProcessEmbedQueue
    from grandbo.local.postgres import PostgresSupervisor, stop_embedded_postgres
    from grandbo.local.runner import LocalEmbedPump, local_keyring, serve
    from grandbo.migrations import migrate
    from grandbo.runtime.lambda_container import (
        LambdaEnvironment,
        LambdaRuntime,
        install_runtime,
        runtime,
    )

    settings = settings_from(args)
    runner_log = settings.data_dir / "runner.log"
    if ":" in args.host:
        print(
            "grandbo serve: --host takes an IPv4 address or name (the local runner "
            "listens on IPv4 only)",
            file=sys.stderr,
        )
        return 2
    # one runner per data directory: a second would take its record, and stopping it
    # would hide the first from every command that looks for it
    holder = serving.running(settings.data_dir)
    if holder is not None:
        print(
            f"grandbo serve: this data directory's Grandbo (pid {holder.pid}) already serves "
            f"{holder.api}: use it, stop it, or give another --data-dir",
            file=sys.stderr,
        )
        return 2
    if args.console_port is not None and args.console_port == args.port and args.port != 0:
        print(
            f"grandbo serve: the API and the console cannot share port {args.port}: give "
            "--console-port another (or --no-console)",
            file=sys.stderr,
        )
        return 2
    # a busy port is refused before any other work, in one line naming it
    ports = [("the API's", args.port)]
    if args.console_port is not None:
        ports.append(("the console's", args.console_port))
    for what, port in ports:
        host = args.host if what == "the API's" else "127.0.0.1"
        if serving.port_in_use(host, port):
            print(serving.busy_port_message(host, port, what, settings.data_dir), file=sys.stderr)
            return 2
    if not args.verbose:  # the terminal shows what a person needs; the rest goes here
        from grandbo.observability import to_local_file

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        to_local_file(runner_log)
    urls = resolve_urls(settings)
    migrate(urls.admin)
    keyring = local_keyring(keyring_path(settings), DEMO_TENANT)
    embed_queue = InProcessEmbedQueue()
    # the keyring from its file, read again whenever it changes: a key removed from it
    # stops authenticating at the next request
    read_url: dict[str, str] = {}
    if args.standby:
        if settings.database_url:
            print("--standby runs a standby of the embedded store only", file=sys.stderr)
            return 2
        from grandbo.local.standby import start_standby
        from grandbo.storage.connections import app_url_for

        standby = start_standby(urls.admin, settings.data_dir / "standby")
        read_url["DATABASE_READ_URL"] = app_url_for(standby)
        print(f"questions read from a streaming standby in {settings.data_dir / 'standby'}")
    environment = LambdaEnvironment.model_validate(
        {
            "DATABASE_URL": urls.app,
            "GRANDBO_EMBEDDING_PROVIDER": settings.provider,
            "GRANDBO_KEYRING_FILE": str(keyring_path(settings)),
            **read_url,
        }
    )
    install_runtime(
        LambdaRuntime(
            environment,
            provider=provider_named(settings.provider),
            embed_queue=embed_queue,
            containers=args.containers,
        )
    )
    pump = LocalEmbedPump(embed_queue, embed_worker)
    # the model loaded before anything is served: the first query meets its deadline
    runtime().provider.warm_or_say()
    service = runtime().service()
    created = seed_demo_once(service)
    # entries of every tenant written before this run (or whose enqueue failed) go through
    # the sweeper path
    embed_queue.send(service.pending_jobs())
    service.mark_title_tags()  # postings from before migration 0014 (none on a new lake)
    service.fill_given_tags()  # tags as written, of entries from before migration 0041
    while pump.pump_once():
        pass
    if created is None:
        print(
            f"demo organization '{DEMO_TENANT}': as you left it (`grandbo demo` seeds it "
            "again); embed queue drained"
        )
    else:
        print(f"demo organization '{DEMO_TENANT}': {created} new entries; embed queue drained")
    print(f"\n$ grandbo query --tenant {DEMO_TENANT} {json.dumps(DEMO_TOPIC)}\n")
    print_result(service.query_org_memory(DEMO_TENANT, DEMO_TOPIC, limit=3), as_json=False)

    from grandbo.local.doors import door_key, is_loopback

    if not is_loopback(args.host):
        print(
            f"grandbo serve: listening on {args.host}, beyond this machine: the API's routes "
            "answer anyone who holds a token or a signing key of the keyring; the local "
            "doors (/local/events, /local/backfill) answer only connections from this machine",
            file=sys.stderr,
            flush=True,
        )
    doors = door_key(settings.data_dir)
    server = serve(args.host, args.port, door_key=doors)
    base = f"http://{args.host}:{server.server_address[1]}"
    console = None
    if args.console_port is not None:  # the curation console, over this gateway
        from grandbo.commands.console import bind_console

        console = bind_console(
            f"http://{_reachable(args.host)}:{server.server_address[1]}",
            keyring.find(f"{DEMO_TENANT}-admin", "admin"),
            port=args.console_port,
            keyring_file=keyring_path(settings),
        )
        console.serve_in_background()
    door_base = base if is_loopback(args.host) else f"http://127.0.0.1:{server.server_address[1]}"
    # where this runner serves, for the commands that talk to it (sign, smoke, people link)
    serving.record(
        settings.data_dir,
        f"http://{_reachable(args.host)}:{server.server_address[1]}",
        None if console is None else console.link.split("/login", 1)[0],
    )
    token = mint_query_token(keyring.find(f"{DEMO_TENANT}-beacon", "query"), ttl_s=86_400)
    create = json.dumps(
        {
            "title": "Disk full on the WAL volume",
            "summary": "Replication lag let WAL accumulate until the volume filled.",
        }
    )
    signed = sign_admin_request(
        keyring.find(f"{DEMO_TENANT}-admin", "admin"), "POST", "/v1/admin/entries", create.encode()
    )
    console_line = (
        ""
        if console is None
        else "Curation console (search explained, entries, review; the link opens one "
        f"session):\n  {console.link}\n"
    )
    signed_headers = " ".join(f"-H '{k}: {v}'" for k, v in signed.items())
    print(
        f"""
Grandbo is serving on {base} (Ctrl-C to stop). Keys: {keyring_path(settings)}
{"" if args.verbose else f"Log lines and metrics: {runner_log} (--verbose shows them here)"}

Query (Beacon's tool; the token is bound to tenant '{DEMO_TENANT}', valid 24 h):
  curl -s {base}/v1/memory/query -H 'Content-Type: application/json' \\
    -H 'Authorization: Bearer {token}' \\
    -d '{{"topic": "pods restart with OOMKilled after we raised the cache TTL", "limit": 3}}'

Admin (signed; this signature is valid once, for 5 minutes):
  curl -s {base}/v1/admin/entries -H 'Content-Type: application/json' {signed_headers} \\
    -d '{create}'
  Sign your own: .venv/bin/grandbo sign POST /v1/admin/entries --body '<json>'
  New query token: .venv/bin/grandbo token

{console_line}
Local doors (EventBridge and Lambda's invoke in AWS): JSON only, to loopback only, with
the local door key ({settings.data_dir / "local-doors.key"}):
Incident closed (EventBridge shape, examples/incident.json in a clone; only corroborated
findings are kept; schema: shared/grandbo/memory/incidents.py):
  curl -s {door_base}/local/events -H 'Content-Type: application/json' \
    -H 'Authorization: Bearer {doors}' -d @examples/incident.json
Backfill / sweeper:
  curl -s {door_base}/local/backfill -H 'Content-Type: application/json' \
    -H 'Authorization: Bearer {doors}' -d '{{"tenant_id": "{DEMO_TENANT}"}}'
""",
        flush=True,
    )
    supervisor = None if settings.database_url else PostgresSupervisor(settings.data_dir).start()
    pump.start()
    # SIGTERM (a service manager, a container stop) ends the loop like Ctrl-C does, so the
    # embedded server is stopped on the way out instead of outliving the runner
    signal.signal(signal.SIGTERM, stop_serving)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, StopServingError):
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # already stopping
        serving.forget(settings.data_dir)
        if supervisor is not None:
            supervisor.stop()
        pump.stop()
        if console is not None:
            console.server.should_exit = True
        server.server_close()
        runtime().close()
        if not settings.database_url:
            stop_embedded_postgres(settings.data_dir)
    return 0


def _reachable(host: str) -> str:
    """Where this process reaches a server bound to `host`: the address itself, or the
    loopback address when it is a wildcard (every interface)."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - recognizing a wildcard bind, not binding
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
