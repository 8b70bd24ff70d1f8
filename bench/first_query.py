"""The first question a fresh process answers, with and without loading the model first.

Seeds the demo organization into a throwaway embedded PostgreSQL, then, --runs times each,
in a fresh interpreter (so the local MiniLM model is not loaded yet): `cold` asks its first
`query_org_memory` directly (what `grandbo query`, `grandbo serve`'s first caller and the
MCP server did before issue 43), `warmed` calls `provider.warm()` first (what they do now)
and asks the same question. Each prints the warm-up's time, the first query's time and the
regime it was answered in (`metadata.searched`: keywords_only when the topic's embedding
missed its 2 s deadline), then a second query's time, the steady state.

Run: `.venv/bin/python -m bench.first_query [--runs 5]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from grandbo.local.demo import DEMO_TENANT, DEMO_TOPIC

_ONE_RUN = """
import json, sys, time
from pathlib import Path
from grandbo.local.bootstrap import open_service
from grandbo.local.settings import Settings

settings = Settings.from_env().model_copy(update={{"data_dir": Path({data_dir!r}),
                                                   "provider": "local"}})
with open_service(settings, apply_migrations=False) as service:
    started = time.perf_counter()
    if {warm}:
        service.provider.warm()
    warmed = time.perf_counter()
    first = service.query_org_memory({tenant!r}, {topic!r})
    answered = time.perf_counter()
    service.query_org_memory({tenant!r}, {topic!r})
    second = time.perf_counter()
print(json.dumps({{"warm_ms": (warmed - started) * 1000,
                  "first_ms": (answered - warmed) * 1000,
                  "searched": first.metadata.searched,
                  "hits": len(first.hits),
                  "second_ms": (second - answered) * 1000}}))
"""


def _seed(data_dir: Path) -> None:
    subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir), "demo"],
        check=True,
        capture_output=True,
        env=None,
    )


def _once(data_dir: Path, *, warm: bool) -> dict[str, float | str]:
    script = _ONE_RUN.format(
        data_dir=str(data_dir), warm=warm, tenant=DEMO_TENANT, topic=DEMO_TOPIC
    )
    done = subprocess.run(  # noqa: S603 - this interpreter
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    )
    result: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grandbo-first-query-") as scratch:
        data_dir = Path(scratch)
        _seed(data_dir)
        rows: dict[str, list[dict[str, float | str]]] = {"cold": [], "warmed": []}
        for _ in range(args.runs):  # alternated: a slow spell lands on both
            rows["cold"].append(_once(data_dir, warm=False))
            rows["warmed"].append(_once(data_dir, warm=True))
    header = f"{'process':<8} {'warm-up ms':>11} {'1st query ms':>13} {'2nd query ms':>13}"
    print(f"{header}  1st answered")
    for name, runs in rows.items():

        def median(key: str, runs: list[dict[str, float | str]] = runs) -> float:
            return statistics.median(float(r[key]) for r in runs)

        regimes = ", ".join(sorted({str(r["searched"]) for r in runs}))
        print(
            f"{name:<8} {median('warm_ms'):>11.0f} {median('first_ms'):>13.0f} "
            f"{median('second_ms'):>13.0f}  {regimes}"
        )


if __name__ == "__main__":
    main()
