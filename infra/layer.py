"""The `grandbo` Lambda layer, bundled locally (no Docker) from platform wheels.

`pip install --platform manylinux2014_aarch64 --only-binary=:all: --require-hashes` fetches
the locked runtime dependencies (infra/layer.lock) for Graviton, the `grandbo` package is
copied beside them, and everything is compiled to bytecode (a read-only layer without
.pyc recompiles at every cold start). `python -m infra.layer` builds it into a folder and
prints its size and versions (`make layer`).
"""

from __future__ import annotations

import compileall
import hashlib
import py_compile
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

ROOT = Path(__file__).resolve().parents[1]

# What the layer installs: infra/layer.in resolved for the target platform, every file
# pinned by hash (`make layer-lock` regenerates it; tests/infra/test_layer.py compares its
# versions with the development install's).
LAYER_LOCK = ROOT / "infra" / "layer.lock"
# Left out of the layer: local mode, the MCP server and the CLI (no function imports them;
# the contracts in pyproject.toml keep it so, and tests/infra/test_layer.py checks it).
LAYER_EXCLUDES = ("__pycache__", "local", "agent", "commands", "cli.py")
PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.11"


@dataclass(frozen=True)
class PythonTarget:
    """A Lambda Python runtime the stack can run on: its lock (the same versions as the
    development install, resolved for its wheels) and the platform pip fetches for."""

    version: str
    platform: str
    lock: Path

    @property
    def runtime(self) -> lambda_.Runtime:
        return {"3.11": lambda_.Runtime.PYTHON_3_11, "3.13": lambda_.Runtime.PYTHON_3_13}[
            self.version
        ]


# `-c python=3.13` deploys on Python 3.13 (Amazon Linux 2023, glibc 2.34: manylinux_2_28
# wheels); the default stays the interpreter the tests run, so the code Lambda runs is
# the code the suite ran. `make layer-lock` writes both locks, 3.13's pinned to 3.11's.
PYTHON_TARGETS = {
    "3.11": PythonTarget("3.11", PLATFORM, LAYER_LOCK),
    "3.13": PythonTarget("3.13", "manylinux_2_28_aarch64", ROOT / "infra" / "layer-py313.lock"),
}
DEFAULT_TARGET = PYTHON_TARGETS[PYTHON_VERSION]


def python_target(version: str | None) -> PythonTarget:
    if version is None:
        return DEFAULT_TARGET
    if version not in PYTHON_TARGETS:
        raise ValueError(f"python={version!r}: use one of {sorted(PYTHON_TARGETS)}")
    return PYTHON_TARGETS[version]


@jsii.implements(ILocalBundling)
class PipLayerBundling:
    """Builds the layer on the deploying machine with pip; returns True when done."""

    def __init__(self, target: PythonTarget = DEFAULT_TARGET) -> None:
        self.target = target

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        require_runtime_interpreter(target=self.target)
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
                self.target.platform,
                "--implementation",
                "cp",
                "--python-version",
                self.target.version,
                "--only-binary=:all:",
                "--no-deps",  # the lock names every package
                "--require-hashes",
                "--requirement",
                str(self.target.lock),
            ],
            check=True,
        )
        shutil.copytree(
            ROOT / "shared" / "grandbo",
            target / "grandbo",
            ignore=shutil.ignore_patterns(*LAYER_EXCLUDES),
        )
        compile_layer(target)
        return True


def require_runtime_interpreter(
    version: tuple[int, int] | None = None, *, target: PythonTarget = DEFAULT_TARGET
) -> None:
    """Bytecode is only used by the Python version that wrote it: a layer compiled by
    another interpreter than the functions' runtime would be compiled again at every cold
    start. Refuse to bundle rather than ship that."""
    running = version or (sys.version_info.major, sys.version_info.minor)
    if f"{running[0]}.{running[1]}" != target.version:
        raise RuntimeError(
            f"the layer targets Python {target.version} but this is "
            f"{running[0]}.{running[1]}: deploy with a Python {target.version} interpreter"
        )


def compile_layer(target: Path) -> None:
    """Bytecode that stays valid in the zip: CDK zips assets with a 1980 mtime, so a
    timestamp-checked .pyc never matches its source and every cold start would compile
    again (Lambda cannot write to /opt); unchecked hash-based .pyc are used as they are,
    for the dependencies pip installed too."""
    compileall.compile_dir(
        str(target),
        quiet=2,
        force=True,  # pip compiled the dependencies already, against their mtimes
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )


def layer_asset_hash(
    lock: str | None = None,
    platform: str = PLATFORM,
    python_version: str = PYTHON_VERSION,
) -> str:
    """What the layer is built from: the package's files, the lock and the target
    platform. CDK's default hash covers `shared/` only, so a changed dependency set or
    platform was never uploaded."""
    digest = hashlib.sha256()
    for part in (LAYER_LOCK.read_text() if lock is None else lock, platform, python_version):
        digest.update(part.encode() + b"\n")
    package = ROOT / "shared" / "grandbo"
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package)
        if path.is_file() and not set(relative.parts) & set(LAYER_EXCLUDES):
            if path.suffix in (".pyc", ".pyo"):
                continue
            digest.update(str(relative).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def layer_code(target: PythonTarget = DEFAULT_TARGET) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(ROOT / "shared"),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=layer_asset_hash(target.lock.read_text(), target.platform, target.version),
        bundling=BundlingOptions(
            image=DockerImage.from_registry("unused-local-bundling-only"),
            local=PipLayerBundling(target),
        ),
    )


def main() -> None:
    """Build the layer into a temporary folder; print its unzipped size and versions."""
    import tempfile
    from importlib.metadata import distributions

    target = python_target(f"{sys.version_info.major}.{sys.version_info.minor}")
    out = Path(tempfile.mkdtemp(prefix="grandbo-layer-"))
    PipLayerBundling(target).try_bundle(str(out), image=DockerImage.from_registry("unused"))
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    print(
        f"layer for Python {target.version} in {out}: {size / 2**20:.1f} MB unzipped "
        "(Lambda's limit: 250 MB)"
    )
    for dist in sorted(distributions(path=[str(out / "python")]), key=lambda d: d.name.lower()):
        print(f"  {dist.name}=={dist.version}")


if __name__ == "__main__":
    main()
