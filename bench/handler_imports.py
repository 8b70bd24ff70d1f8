"""Cold-start import time of every Lambda handler, each in a fresh interpreter.

Baselines in the same run: a bare interpreter, and `import boto3` (which every Lambda
Python runtime pays too). Bytecode is compiled first, as the Lambda layer ships it
(a read-only layer without .pyc recompiles every module at every cold start).
Run: `.venv/bin/python -m bench.handler_imports [--runs N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HANDLERS = [
    "functions.query_api.handler",
    "functions.authorizer.handler",
    "functions.admin_api.handler",
    "functions.incident_closed.handler",
    "functions.embed_worker.handler",
    "functions.backfill.handler",
]


def deployed_xray_sdk() -> dict[str, bool]:
    """Whether each handler runs with the X-Ray SDK, as the CDK stack deploys it."""
    from infra.functions import SPECS

    return {f"functions.{spec.folder}.handler": spec.xray_sdk for spec in SPECS.values()}


PROBE = """
import json, sys, time
t = time.perf_counter()
{statement}
elapsed = time.perf_counter() - t
heavy = [m for m in ("onnxruntime", "tokenizers", "numpy", "grandbo.embedding.local")
         if m in sys.modules]
print(json.dumps({{"ms": elapsed * 1000, "heavy": heavy}}))
"""


def measure_once(statement: str, xray_sdk: bool) -> tuple[float, list[str]]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "GRANDBO_EMBEDDING_PROVIDER": "titan",
        "DATABASE_URL": "postgresql://unused",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "GRANDBO_XRAY_SDK": "true" if xray_sdk else "false",
    }
    out = subprocess.run(  # noqa: S603 - our own interpreter and probe
        [sys.executable, "-X", "frozen_modules=on", "-c", PROBE.format(statement=statement)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return float(report["ms"]), list(report["heavy"])


def compile_bytecode() -> None:
    import compileall
    import site

    for folder in ("shared", "functions", *site.getsitepackages()):
        compileall.compile_dir(folder, quiet=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    compile_bytecode()
    sdk = deployed_xray_sdk()
    rows = [
        ("baseline: nothing", "pass", False),
        ("baseline: import boto3", "import boto3", False),
        # what any Python Lambda with these libraries pays (issue 51's comparison)
        ("baseline: boto3 + pydantic + psycopg", "import boto3, pydantic, psycopg", False),
    ]
    rows += [(name, f"import {name}", sdk[name]) for name in HANDLERS]
    rows.append(
        (
            "query handler + Titan provider built",
            "import functions.query_api.handler\n"
            "from grandbo.runtime.lambda_container import runtime\nruntime().provider",
            sdk["functions.query_api.handler"],
        )
    )
    rows.append(
        ("query handler, X-Ray SDK (not deployed)", "import functions.query_api.handler", True)
    )
    # round robin: a slow spell on this shared machine lands on every row, not on one
    samples: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    heavy: dict[str, list[str]] = {}
    for _ in range(args.runs):
        for label, statement, xray in rows:
            ms, heavy[label] = measure_once(statement, xray)
            samples[label].append(ms)
    title = "import (fresh interpreter, Titan configured)"
    print(f"{title:<52} {'X-Ray SDK':>9} {'median ms':>10} {'max ms':>8}  heavy")
    for label, _, xray in rows:
        median, worst = statistics.median(samples[label]), max(samples[label])
        flag, loaded = ("on" if xray else "off"), ",".join(heavy[label]) or "-"
        print(f"{label:<52} {flag:>9} {median:>10.1f} {worst:>8.1f}  {loaded}")
    bare = statistics.median(samples["baseline: boto3 + pydantic + psycopg"])
    query = statistics.median(samples["functions.query_api.handler"])
    print(f"query handler / boto3 + pydantic + psycopg: {query / bare:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
