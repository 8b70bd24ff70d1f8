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
    # Then each is in the copy, and the copy has no local mode and no CLI
    assert "grandbo.runtime.lambda_container" in imported
    for module in imported:
        parts = module.split(".")[1:]
        as_module = target.joinpath(*parts).with_suffix(".py")
        as_package = target.joinpath(*parts, "__init__.py")
        assert as_module.exists() or as_package.exists(), module
    assert not (target / "local").exists()
    assert not (target / "cli.py").exists()
    assert (target / "migrations" / "0001_memory_store.sql").exists()
