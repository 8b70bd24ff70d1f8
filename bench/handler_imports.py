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

PROBE = """
import json, sys, time
t = time.perf_counter()
{statement}
elapsed = time.perf_counter() - t
heavy = [m for m in ("onnxruntime", "tokenizers", "numpy", "grandbo.embedding.local")
         if m in sys.modules]
print(json.dumps({{"ms": elapsed * 1000, "heavy": heavy}}))
"""


def measure(statement: str, runs: int) -> tuple[float, float, list[str]]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "GRANDBO_EMBEDDING_PROVIDER": "titan",
        "DATABASE_URL": "postgresql://unused",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    samples, heavy = [], []
    for _ in range(runs):
        out = subprocess.run(  # noqa: S603 - our own interpreter and probe
            [sys.executable, "-X", "frozen_modules=on", "-c", PROBE.format(statement=statement)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        report = json.loads(out.stdout.strip().splitlines()[-1])
        samples.append(report["ms"])
        heavy = report["heavy"]
    return statistics.median(samples), max(samples), heavy


def compile_bytecode() -> None:
    import compileall
    import site

    for folder in ("shared", "functions", *site.getsitepackages()):
        compileall.compile_dir(folder, quiet=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    compile_bytecode()
    rows = [("baseline: nothing", "pass"), ("baseline: import boto3", "import boto3")]
    rows += [(name, f"import {name}") for name in HANDLERS]
    rows.append(
        (
            "query handler + Titan provider built",
            "import functions.query_api.handler\n"
            "from grandbo.lambda_runtime import runtime\nruntime().provider",
        )
    )
    title = "import (fresh interpreter, Titan configured)"
    print(f"{title:<48} {'median ms':>10} {'max ms':>8}  heavy")
    for label, statement in rows:
        median, worst, heavy = measure(statement, args.runs)
        print(f"{label:<48} {median:>10.1f} {worst:>8.1f}  {','.join(heavy) or '-'}")


if __name__ == "__main__":
    main()
