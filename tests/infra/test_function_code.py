"""Each function's code as Lambda unzips it (issue 46's review: the admin API's routes by
area are modules beside its handler, which the code asset must carry with the `functions`
package around them). Its handler is read as a dotted module path, `folder.file.function`
for a handler in a subfolder package
(https://docs.aws.amazon.com/lambda/latest/dg/python-handler.html#naming): here each staged
asset is imported in a fresh interpreter that sees only it and the layer's package, as
/var/task and /opt/python are seen in Lambda."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from infra.functions import ROOT, SPECS, function_handler, function_source
from infra.layer import LAYER_EXCLUDES

FOLDERS = sorted(p.name for p in (ROOT / "functions").iterdir() if (p / "handler.py").exists())
# a fresh interpreter without the editable install's finder (which maps `functions` to
# the repository): only the staged code and the layer's package are importable
_IMPORT = """
import importlib, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
sys.path[:0] = [sys.argv[1], sys.argv[2]]
module, _, name = sys.argv[3].rpartition(".")
handler = getattr(importlib.import_module(module), name)
import functions
assert functions.__file__.startswith(sys.argv[1]), functions.__file__
assert callable(handler)
print("ok", module)
"""


def test_every_function_folder_is_in_the_stack_table() -> None:
    assert {spec.folder for spec in SPECS.values()} == set(FOLDERS)


@pytest.fixture(scope="module")
def layer_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The layer's package as the layer's bundling copies it (no local mode, CLI or MCP)."""
    target = tmp_path_factory.mktemp("layer") / "python"
    shutil.copytree(
        ROOT / "shared" / "grandbo",
        target / "grandbo",
        ignore=shutil.ignore_patterns(*LAYER_EXCLUDES),
    )
    return target


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_functions_staged_code_imports_its_handler_alone(
    folder: str, layer_package: Path
) -> None:
    staged = function_source(folder)
    assert (staged / "functions" / "__init__.py").exists()
    assert (staged / "functions" / folder / "handler.py").exists()
    assert not list(staged.rglob("__pycache__"))
    ran = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [
            sys.executable,
            "-c",
            _IMPORT,
            str(staged),
            str(layer_package),
            function_handler(folder),
        ],
        capture_output=True,
        text=True,
        cwd=staged,
        env={
            "PATH": "/usr/bin:/bin",
            "AWS_DEFAULT_REGION": "us-east-1",
            "GRANDBO_EMBEDDING_PROVIDER": "fake",
            "DATABASE_URL": "postgresql://unused@127.0.0.1:1/unused",
            "POWERTOOLS_TRACE_DISABLED": "1",
            "POWERTOOLS_METRICS_NAMESPACE": "grandbo",
        },
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == f"ok functions.{folder}.handler"


def test_the_admin_api_asset_carries_its_routes_by_area() -> None:
    staged = function_source("admin_api")
    modules = {p.stem for p in (staged / "functions" / "admin_api").glob("*.py")}
    assert {"handler", "entries", "curation_reads", "organization", "topology", "people"} <= (
        modules
    )
