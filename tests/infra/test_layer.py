"""The layer ships everything the handlers import, and leaves local mode and the CLI out."""

from __future__ import annotations

import shutil
from pathlib import Path

import grimp
from infra.layer import LAYER_EXCLUDES, ROOT


def test_layer_copy_holds_every_module_the_handlers_import(tmp_path: Path) -> None:
    # Given the package copied as the layer bundling copies it
    target = tmp_path / "grandbo"
    shutil.copytree(
        ROOT / "shared" / "grandbo", target, ignore=shutil.ignore_patterns(*LAYER_EXCLUDES)
    )
    # When every grandbo module a handler imports, directly or not, is listed
    graph = grimp.build_graph("grandbo", "functions")
    imported = {
        module
        for module in graph.find_upstream_modules("functions", as_package=True)
        if module.startswith("grandbo.")
    }
    # Then each is in the copy, and the copy has no local mode, MCP server or CLI
    assert "grandbo.runtime.lambda_container" in imported
    for module in imported:
        parts = module.split(".")[1:]
        as_module = target.joinpath(*parts).with_suffix(".py")
        as_package = target.joinpath(*parts, "__init__.py")
        assert as_module.exists() or as_package.exists(), module
    assert not (target / "local").exists()
    assert not (target / "agent").exists()  # the MCP server: never in a Lambda
    assert not (target / "commands").exists()
    assert not (target / "cli.py").exists()
    assert (target / "migrations" / "0001_memory_store.sql").exists()


def test_the_layer_hash_changes_with_requirements_and_platform() -> None:
    # issue 12, item 2: CDK hashed shared/ only, so a new dependency set was never uploaded
    from infra.layer import LAYER_LOCK, PLATFORM, PYTHON_VERSION, layer_asset_hash

    base = layer_asset_hash()
    assert layer_asset_hash() == base  # stable
    assert layer_asset_hash(lock=LAYER_LOCK.read_text() + "orjson==3.10.0\n") != base
    assert layer_asset_hash(platform="manylinux_2_28_aarch64") != base
    assert layer_asset_hash(python_version="3.13") != base
    assert (PLATFORM, PYTHON_VERSION) == ("manylinux2014_aarch64", "3.11")


def test_layer_bytecode_stays_valid_after_the_zip_round_trip(tmp_path: Path) -> None:
    # issue 12, item 3: CDK zips with a 1980 mtime; timestamp .pyc would never match
    import importlib.util
    import zipfile

    from infra.layer import compile_layer

    built = tmp_path / "python"
    shutil.copytree(ROOT / "shared" / "grandbo" / "text", built / "text")
    compile_layer(built)
    archive = tmp_path / "layer.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted(built.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo(str(path.relative_to(built)), (1980, 1, 1, 0, 0, 0))
                zipped.writestr(info, path.read_bytes())
    unpacked = tmp_path / "opt"
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(unpacked)
    pycs = list(unpacked.rglob("*.pyc"))
    assert pycs
    for pyc in pycs:
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b01, pyc  # hash-based, never checked against the source's mtime
        source = unpacked / "text" / (pyc.name.split(".")[0] + ".py")
        expected = importlib.util.source_hash(source.read_bytes())
        assert pyc.read_bytes()[8:16] == expected  # and it is the source's own bytecode


def test_bundling_refuses_an_interpreter_other_than_the_runtime() -> None:
    import pytest
    from infra.layer import PYTHON_VERSION, require_runtime_interpreter

    major, minor = (int(part) for part in PYTHON_VERSION.split("."))
    require_runtime_interpreter((major, minor))
    with pytest.raises(RuntimeError, match="deploy with a Python"):
        require_runtime_interpreter((major, minor + 2))


def test_development_installs_what_the_layer_ships() -> None:
    # issue 12, item 2: one set of versions for the code the tests run and the code Lambda
    # runs (the layer resolved psycopg 3.2.13 while the tests ran 3.3.9)
    import re
    from importlib.metadata import version

    from infra.layer import LAYER_LOCK

    locked = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", LAYER_LOCK.read_text(), re.MULTILINE))
    for name in (
        "psycopg",
        "psycopg-binary",
        "pgvector",
        "pydantic",
        "pydantic-core",
        "pystemmer",
        "confusable-homoglyphs",
        "certifi",
        "aws-lambda-powertools",
        "boto3",
        "botocore",
        "s3transfer",
    ):
        assert version(name) == locked[name], name


def test_the_python_313_target_ships_the_same_versions_for_its_own_wheels() -> None:
    # issue 12, item 7: every layer dependency has cp313 aarch64 wheels at the versions the
    # tests run; `-c python=3.13` deploys them (with a 3.13 interpreter to compile them)
    import re

    import pytest
    from infra.layer import (
        DEFAULT_TARGET,
        PYTHON_TARGETS,
        python_target,
        require_runtime_interpreter,
    )

    def pins(target_lock: Path) -> dict[str, str]:
        return dict(re.findall(r"^([a-z0-9-]+)==(\S+)", target_lock.read_text(), re.MULTILINE))

    py313 = python_target("3.13")
    assert py313.runtime.name == "python3.13"
    assert py313.platform == "manylinux_2_28_aarch64"
    assert pins(py313.lock) == pins(DEFAULT_TARGET.lock)
    assert python_target(None) is DEFAULT_TARGET is PYTHON_TARGETS["3.11"]
    require_runtime_interpreter((3, 13), target=py313)
    with pytest.raises(RuntimeError, match=r"deploy with a Python 3\.13 interpreter"):
        require_runtime_interpreter((3, 11), target=py313)
    with pytest.raises(ValueError, match="use one of"):
        python_target("3.12")
