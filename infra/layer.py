"""The `grandbo` Lambda layer, bundled locally (no Docker) from platform wheels.

`pip install --platform manylinux2014_aarch64 --only-binary=:all:` fetches the runtime
dependencies for Graviton, the `grandbo` package is copied beside them, and everything is
compiled to bytecode (a read-only layer without .pyc recompiles at every cold start).
"""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

ROOT = Path(__file__).resolve().parents[1]

# What the Lambdas import at run time: not the local model, not the embedded server.
LAYER_REQUIREMENTS = [
    "psycopg[binary]>=3.2,<4",
    "pgvector>=0.4,<0.6",
    "pydantic>=2.7,<3",
    "PyStemmer>=2.2,<4",
    "aws-lambda-powertools[tracer]>=3.10,<4",
]
# Left out of the layer: local mode and the CLI (no function imports them; the layers
# contract in pyproject.toml keeps it so, and tests/infra/test_layer.py checks it).
LAYER_EXCLUDES = ("__pycache__", "local", "cli.py")
PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.11"


@jsii.implements(ILocalBundling)
class PipLayerBundling:
    """Builds the layer on the deploying machine with pip; returns True when done."""

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        target = Path(output_dir) / "python"
        subprocess.run(  # noqa: S603 - fixed arguments, the deploying interpreter's pip
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--target",
                str(target),
                "--platform",
                PLATFORM,
                "--implementation",
                "cp",
                "--python-version",
                PYTHON_VERSION,
                "--only-binary=:all:",
                *LAYER_REQUIREMENTS,
            ],
            check=True,
        )
        shutil.copytree(
            ROOT / "shared" / "grandbo",
            target / "grandbo",
            ignore=shutil.ignore_patterns(*LAYER_EXCLUDES),
        )
        compileall.compile_dir(str(target), quiet=2)
        return True


def layer_code() -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(ROOT / "shared"),
        bundling=BundlingOptions(
            image=DockerImage.from_registry("unused-local-bundling-only"),
            local=PipLayerBundling(),
        ),
    )
