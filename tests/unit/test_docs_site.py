"""The documentation site builds offline in strict mode (a broken link, a missing page or
a page left out of the navigation fails it), and its references are generated: every
route of docs/openapi.json and every command of the parser appear in them (issue 45)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_site_builds_strictly_with_generated_references(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(  # noqa: S603 - MkDocs of this venv
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    api = (site / "reference" / "http-api.html").read_text()
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    for path in document["paths"]:
        assert path.replace("{", "").split("/")[1] in api
        assert path in api, f"{path} is not in the generated HTTP API reference"
    cli = (site / "reference" / "cli.html").read_text()
    from grandbo.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in commands.choices:
        assert f"grandbo {name}" in cli, f"`grandbo {name}` is not in the CLI reference"
    assert (site / "glossary.html").exists()
    assert (site / "search" / "search_index.json").exists()  # the site's search
    # opened as a file (the Makefile says: open site/index.html), every link of every page
    # reaches a file, and nothing is fetched from another host (fonts included)
    for page in site.rglob("*.html"):
        if page.name == "404.html":  # a web server's page, with absolute links
            continue
        html = page.read_text()
        assert "fonts.googleapis.com" not in html, page
        for target in re.findall(r'href="([^"#?]+)"', html):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            resolved = (page.parent / target).resolve()
            assert resolved.is_file(), f"{page.relative_to(site)} links {target}: no such file"
