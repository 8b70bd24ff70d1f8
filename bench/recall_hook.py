"""What the recall hook adds to a model call, against the local runner (`grandbo serve`).

Starts `grandbo serve` on a throwaway data directory (the demo organization, the local
MiniLM model unless --provider says otherwise), then alternates, --rounds times, a bare
`MemoryClient.query_org_memory(topic)` (the baseline, same run) and
`RecallHook.recall(prompt)`, where the prompt is a 4,000-character agent prompt (log
lines) ending with the finding and `topic` is what the hook makes of it: the hook's
added latency is its own work (the topic, the worker thread, the block), not a different
query. A third series sends the whole prompt's last 4,000 characters as the topic, which
is what the hook's 600-character cap avoids. Then the hook's fail-open latency against a
closed port and against a server that never answers (bounded by its timeout).

Run: `.venv/bin/python -m bench.recall_hook [--rounds 200] [--provider local|fake]`.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.local_load import TOPICS, free_port, wait_until_serving
from grandbo.api.auth import Keyring, mint_query_token
from grandbo.api.client import MemoryClient
from grandbo.api.recall import DEFAULT_TIMEOUT_S, RecallHook, topic_from_text
from grandbo.memory.domain.topic import MAX_TOPIC_CHARS

PREAMBLE = "You are the on-call investigator. Tool output follows.\n" + (
    "2026-11-30T03:12:09Z level=warn msg=retrying upstream call attempt=3\n" * 60
)


def percentiles(samples_ms: list[float]) -> str:
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return f"p50 {cuts[49]:7.1f} ms   p95 {cuts[94]:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--provider", default="local", choices=["local", "fake"])
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="grandbo-recall-"))
    port = free_port()
    grandbo = [sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir)]
    serve = subprocess.Popen(  # noqa: S603 - our own CLI
        [*grandbo, "--provider", args.provider, "serve", "--port", str(port)],
        stdout=(data_dir / "serve.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_serving(port, serve, timeout=300)
        keyring = Keyring.from_json((data_dir / "keyring.json").read_text())
        token = mint_query_token(keyring.find("demo-beacon", "query"))
        base = f"http://127.0.0.1:{port}"
        bare = MemoryClient(base, token, timeout=5)
        hook = RecallHook(base, token, timeout_s=5)
        for topic in TOPICS:  # warm the model and the connections
            bare.query_org_memory(topic)
            hook.recall(PREAMBLE + topic)
        bare_ms, hook_ms, added_ms, whole_ms = [], [], [], []
        for round_ in range(args.rounds):
            prompt = PREAMBLE + TOPICS[round_ % len(TOPICS)]
            started = time.perf_counter()
            bare.query_org_memory(topic_from_text(prompt), limit=5)
            bare_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            recall = hook.recall(prompt)
            hook_ms.append((time.perf_counter() - started) * 1000)
            assert recall.reason in (None, "no_match"), recall.detail
            added_ms.append(hook_ms[-1] - bare_ms[-1])
            started = time.perf_counter()
            bare.query_org_memory(topic_from_text(prompt, MAX_TOPIC_CHARS), limit=5)
            whole_ms.append((time.perf_counter() - started) * 1000)
        print(f"grandbo serve on {base}, provider {args.provider}, {args.rounds} rounds")
        print(f"bare HTTP query (baseline)    {percentiles(bare_ms)}")
        print(f"recall hook                   {percentiles(hook_ms)}")
        print(f"added by the hook             {percentiles(added_ms)}")
        print(f"bare, 4,000-character topic   {percentiles(whole_ms)}")
        print(f"hook metrics: {hook.metrics.snapshot()}")
    finally:
        serve.terminate()
        serve.wait(60)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    threading.Thread(target=lambda: [silent.accept() for _ in range(100)], daemon=True).start()
    for name, url in (
        ("connection refused", closed),
        (
            f"no answer (timeout {DEFAULT_TIMEOUT_S} s)",
            f"http://127.0.0.1:{silent.getsockname()[1]}",
        ),
    ):
        failing = RecallHook(url, "gbq1.k.1.00", breaker_failures=1000)  # every call goes out
        samples = []
        for _ in range(20):
            started = time.perf_counter()
            assert failing.recall(PREAMBLE + TOPICS[0]).failed_open
            samples.append((time.perf_counter() - started) * 1000)
        print(f"fail-open, {name:<28}{percentiles(samples)}")


if __name__ == "__main__":
    main()
