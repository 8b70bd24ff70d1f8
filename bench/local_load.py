"""Load and fault benchmark of the local runner (`grandbo serve`), over real HTTP.

Starts `grandbo serve` in its own process on a throwaway data directory (embedded
PostgreSQL, the default local MiniLM model unless --provider says otherwise), then:

1. load: 1 client (the baseline, same run), then 8 and 32 concurrent clients, each for
   --seconds; 90 % queries, 10 % signed admin creates. Prints requests/s, p50/p95/p99
   and errors (any status other than 200/201, and any connection error or reset).
2. fault: 8 clients again, and the embedded PostgreSQL's postmaster is killed (SIGKILL)
   after a third of the phase: requests during the outage must be 503, the service must
   answer again by itself (recovery measured from the kill to the first request after
   which every request succeeded).
3. afterwards: every acknowledged create is read back by id (again while the store
   answers 503, up to 60 s), and `grandbo rebuild --verify-only` must report the
   projection clean.

The demo organization's query rate is raised first: the load is one token, and the
admission's limit (429) is not what this measures.

Run: `.venv/bin/python -m bench.local_load [--seconds 30] [--provider local|fake]`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grandbo.api.auth import Keyring, mint_query_token, sign_admin_request
from grandbo.api.client import user_agent

TENANT = "demo"
TOPICS = [
    "the payments database ran out of connections after a deploy and requests timed out",
    "pods restart with OOMKilled after we raised the cache TTL on the session service",
    "checkout latency doubled because a migration held row locks on the orders table",
    "search queries time out while shards relocate and disks are saturated",
    "the WAL volume filled up because a replication slot of a dead replica pinned it",
]


@dataclass
class Phase:
    name: str
    clients: int
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    timeline: list[tuple[float, str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    cpu_ms: dict[str, float] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status not in ("200", "201"))

    def row(self) -> str:
        ms = sorted(self.latencies)

        def pct(p: float) -> float:
            return 1000 * ms[min(len(ms) - 1, int(p * len(ms)))] if ms else float("nan")

        rate = len(ms) / self.elapsed if self.elapsed else 0.0
        return (
            f"{self.name:<22}{self.clients:>8}{len(ms):>9}{rate:>10.1f}"
            f"{pct(0.50):>9.1f}{pct(0.95):>9.1f}{pct(0.99):>9.1f}{self.errors:>8}"
            f"  {dict(self.statuses)}"
            + "".join(
                f"\n{'':<22}CPU per request: {who} {ms / max(1, len(self.latencies)):.1f} ms"
                for who, ms in self.cpu_ms.items()
            )
        )


class Client:
    def __init__(self, port: int, keyring: Keyring, data_dir: Path) -> None:
        self.port = port
        self.data_dir = data_dir
        self.admin = keyring.find(f"{TENANT}-admin", "admin")
        self.token = mint_query_token(keyring.find(f"{TENANT}-beacon", "query"), ttl_s=86_400)

    def request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            # named, as the deployed WAF and the local edge require (grandbo.api.edge)
            named = {"User-Agent": user_agent("bench-load"), **headers}
            conn.request(method, path, body=body or None, headers=named)
            response = conn.getresponse()
            return str(response.status), response.read()
        except (OSError, http.client.HTTPException) as exc:
            return type(exc).__name__, b""
        finally:
            conn.close()

    def raise_query_rate(self, per_minute: int = 100_000) -> str:
        """The organization's query rate per caller raised: the load is one token, and the
        admission's 429s (issue 51) are not what this measures. The status of the write."""
        body = json.dumps({"query_rate_per_minute": per_minute}).encode()
        signed = sign_admin_request(self.admin, "POST", "/v1/admin/settings", body)
        status, _ = self.request(
            "POST", "/v1/admin/settings", body, {"Content-Type": "application/json", **signed}
        )
        return str(status)

    def read_back(self, entry_id: str, wait_s: float) -> str:
        """GET the entry by id, again while the store answers 503 (restarting), up to
        `wait_s`: whether an acknowledged write is still there, not whether it is yet."""
        headers = {"Authorization": f"Bearer {self.token}"}
        deadline = time.monotonic() + wait_s
        while True:
            status, _ = self.request("GET", f"/v1/memory/entries/{entry_id}", b"", headers)
            if status != "503" or time.monotonic() > deadline:
                return str(status)
            time.sleep(0.2)

    def one(self, rng: random.Random) -> tuple[str, str | None]:
        """One request of the mix; the created entry's id for an acknowledged create."""
        if rng.random() < 0.9:
            body = json.dumps({"topic": rng.choice(TOPICS), "limit": 5}).encode()
            headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
            status, _ = self.request("POST", "/v1/memory/query", body, headers)
            return status, None
        n = rng.randrange(10**9)
        body = json.dumps(
            {
                "title": f"Load lesson {n}",
                "summary": f"Under load, lesson {n}: the connection pool saturated at peak.",
            }
        ).encode()
        signed = sign_admin_request(self.admin, "POST", "/v1/admin/entries", body)
        status, raw = self.request(
            "POST", "/v1/admin/entries", body, {"Content-Type": "application/json", **signed}
        )
        entry_id = json.loads(raw)["entry"]["entry_id"] if status == "201" else None
        return status, entry_id


def cpu_seconds(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU time (user + system) so far of each group of processes."""
    import psutil

    totals: dict[str, float] = {}
    for who, group in pids.items():
        total = 0.0
        for pid in group:
            try:
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system
            except psutil.Error:
                continue
        totals[who] = total
    return totals


def process_groups(serve_pid: int, data_dir: Path) -> dict[str, list[int]]:
    import psutil

    postgres = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(data_dir) in " ".join(p.info["cmdline"] or []) and p.pid != serve_pid
    ]
    postmaster = postmaster_pid(data_dir)
    children = [c.pid for c in psutil.Process(postmaster).children()]
    return {"runner": [serve_pid], "postgres": sorted(set(postgres + children + [postmaster]))}


def run_phase(
    client: Client,
    phase: Phase,
    seconds: float,
    on_start: Any = None,
    measure: dict[str, list[int]] | None = None,
) -> Phase:
    lock = threading.Lock()
    before = cpu_seconds(measure) if measure else {}
    start = time.monotonic()
    deadline = start + seconds

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            began = time.monotonic()
            status, entry_id = client.one(rng)
            took = time.monotonic() - began
            with lock:
                phase.latencies.append(took)
                phase.statuses[status] += 1
                phase.timeline.append((began - start, status))
                if entry_id:
                    phase.created.append(entry_id)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(phase.clients)]
    for thread in threads:
        thread.start()
    if on_start is not None:
        on_start(start)
    for thread in threads:
        thread.join()
    phase.elapsed = time.monotonic() - start
    if measure:
        after = cpu_seconds(process_groups(measure["runner"][0], client.data_dir))
        phase.cpu_ms = {who: 1000 * (after[who] - before[who]) for who in before}
    return phase


def start_serve(
    data_dir: Path,
    arguments: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`grandbo --data-dir DATA_DIR ARGUMENTS` in its own process, its output in
    DATA_DIR/serve.log."""
    return subprocess.Popen(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir), *arguments],
        env=env,
        cwd=cwd,
        stdout=(data_dir / "serve.log").open("wb"),
        stderr=subprocess.STDOUT,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_serving(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"grandbo serve exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("grandbo serve did not start in time")


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


def recovery(timeline: list[tuple[float, str]], killed_at: float) -> tuple[float, Counter[str]]:
    """Seconds from the kill to the first request after which all succeeded, and the
    statuses seen in between."""
    ordered = sorted(timeline)
    last_failure = max((t for t, s in ordered if s not in ("200", "201")), default=killed_at)
    during = Counter(s for t, s in ordered if killed_at <= t <= last_failure)
    return max(0.0, last_failure - killed_at), during


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--provider", default="local", choices=["local", "fake"])
    parser.add_argument("--containers", type=int, default=4)
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="grandbo-load-"))
    port = free_port()
    grandbo = [sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir)]
    serve_args = ["--provider", args.provider, "serve", "--port", str(port)]
    serve = start_serve(data_dir, [*serve_args, "--containers", str(args.containers)])
    try:
        wait_until_serving(port, serve, timeout=300)
        keyring = Keyring.from_json((data_dir / "keyring.json").read_text())
        client = Client(port, keyring, data_dir)
        print(f"grandbo serve on 127.0.0.1:{port}, provider {args.provider}, pid {serve.pid}")
        if client.raise_query_rate() != "200":
            raise SystemExit("could not raise the demo organization's query rate")
        print(
            f"\n{'phase':<22}{'clients':>8}{'requests':>9}{'req/s':>10}"
            f"{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'errors':>8}  statuses"
        )
        phases = []
        for clients in (1, 8, 32):
            name = "baseline: 1 client" if clients == 1 else f"load: {clients} clients"
            groups = process_groups(serve.pid, data_dir)
            phase = run_phase(client, Phase(name, clients), args.seconds, measure=groups)
            phases.append(phase)
            print(phase.row(), flush=True)

        killed: list[float] = []

        def kill_postgres(start: float) -> None:
            time.sleep(args.seconds / 3)
            os.kill(postmaster_pid(data_dir), signal.SIGKILL)
            killed.append(time.monotonic() - start)

        fault = run_phase(client, Phase("fault: 8 clients", 8), args.seconds, kill_postgres)
        phases.append(fault)
        print(fault.row())
        took, during = recovery(fault.timeline, killed[0])
        print(
            f"\npostmaster killed at {killed[0]:.1f} s; every request succeeded again "
            f"{took:.1f} s later; statuses in between: {dict(during)}"
        )

        created = [entry_id for phase in phases for entry_id in phase.created]
        read_back = Counter(client.read_back(entry_id, wait_s=60) for entry_id in created)
        missing = sum(n for status, n in read_back.items() if status != "200")
        print(
            f"acknowledged creates: {len(created)}; not served afterwards: {missing}"
            + (f" (statuses {dict(read_back)})" if missing else "")
        )
        verify = subprocess.run(  # noqa: S603 - our own CLI
            [*grandbo, "rebuild", "--tenant", TENANT, "--verify-only"],
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"rebuild --verify-only: exit {verify.returncode}: {verify.stdout.strip()[-200:]}")
        base = phases[0]
        at8 = phases[1]
        at32 = phases[2]
        ratio = (len(at8.latencies) / at8.elapsed) / (len(base.latencies) / base.elapsed)
        p99 = 1000 * sorted(at32.latencies)[int(0.99 * len(at32.latencies))]
        print(
            f"\n8 clients: {ratio:.1f}x the single-client rate; "
            f"32 clients: {at32.errors} errors, p99 {p99:.0f} ms"
        )
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
        import psutil

        left = [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if str(data_dir) in " ".join(p.info["cmdline"] or [])
        ]
        print(f"after SIGTERM: runner exit {serve.returncode}, processes left: {len(left)}")


if __name__ == "__main__":
    main()
