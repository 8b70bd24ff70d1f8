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


def build_site(site: Path) -> Path:
    """The site as `make docs` builds it (strict), into `site`."""
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
    return site


def test_the_docs_site_builds_strictly_with_generated_references(tmp_path: Path) -> None:
    site = build_site(tmp_path / "site")
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
        # no script, style sheet or font from another host (a closed network has none)
        remote = re.findall(
            r'<(?:script|link|img|iframe)\b[^>]*(?:src|href)="(https?:[^"]*)"', html
        )
        remote = [url for url in remote if not re.search(r'<a\b[^>]*href="' + re.escape(url), html)]
        assert remote == [], f"{page.relative_to(site)} loads {remote}"
        for target in re.findall(r'href="([^"#?]+)"', html):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            resolved = (page.parent / target).resolve()
            assert resolved.is_file(), f"{page.relative_to(site)} links {target}: no such file"


def reference_pages() -> tuple[dict[str, str], dict[str, str]]:
    """The pages docs/reference/generate.py writes (name -> Markdown), and its CURLS."""
    import contextlib
    import importlib.util
    import io
    import types

    pages: dict[str, io.StringIO] = {}
    fake = types.ModuleType("mkdocs_gen_files")
    fake.open = lambda name, mode: contextlib.nullcontext(pages.setdefault(name, io.StringIO()))  # type: ignore[attr-defined]
    sys.modules["mkdocs_gen_files"] = fake
    try:
        spec = importlib.util.spec_from_file_location(
            "generate_reference", ROOT / "docs" / "reference" / "generate.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del sys.modules["mkdocs_gen_files"]
    return {name: text.getvalue() for name, text in pages.items()}, dict(module.CURLS)


DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_grandbo_command_the_docs_name_exists() -> None:
    """Issue 53: the glossary named `grandbo lake export/import`, which never existed."""
    from grandbo.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    nested = {
        name: set(action.choices)
        for name, sub in commands.choices.items()
        for action in sub._actions
        if isinstance(action, argparse._SubParsersAction)
    }
    unknown = []
    for doc in DOC_FILES:
        for named in re.finditer(
            r"(?<![\w./-])grandbo ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", doc.read_text()
        ):
            command, sub = named.groups()
            if command not in commands.choices or (
                command in nested and sub is not None and sub not in nested[command]
            ):
                unknown.append(f"{doc.relative_to(ROOT)}: {named.group(0)}")
    assert unknown == []


def test_every_route_the_docs_name_is_served() -> None:
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())

    def shape(route: str) -> str:  # {entry_id}, <entry_id> and ENTRY_ID are one parameter
        return re.sub(r"\{[^}/]+\}|<[^>/]+>|(?<=/)[A-Z][A-Z_]+(?=/|$)", "{}", route)

    served = {shape(path) for path in document["paths"]}
    unknown = []
    for doc in DOC_FILES:
        for named in re.finditer(r"(/v1/[A-Za-z0-9_{}<>/.-]*[A-Za-z0-9_}>])", doc.read_text()):
            route = shape(named.group(1).replace("/v1/iam/admin", "/v1/admin"))
            is_prefix = any(path.startswith(route + "/") for path in served)
            if route not in served and not is_prefix and route != "/v1/iam":
                unknown.append(f"{doc.relative_to(ROOT)}: {named.group(1)}")
    assert unknown == []


def test_every_route_is_on_the_reference_page_with_its_auth_and_statuses() -> None:
    """Read from the generated Markdown: each route under its task, with who may call
    it, and every status its OpenAPI entry lists (429 and 503 saying Retry-After)."""
    pages, _ = reference_pages()
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    page = pages["reference/http-api.md"]
    assert "## Run it" in pages["quickstart.md"]  # the README's quickstart
    assert page.index("## Ask memory") < page.index("## Write lessons") < page.index("## Curate")
    assert "Authorization: Bearer" in page
    assert "SigV4" in page
    assert page.count("curl") >= 2
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            heading = f"### `{method.upper()} {path}`"
            assert heading in page, heading
            section = page[page.index(heading) :].split("\n### ", 1)[0]
            assert "Auth: " in section, heading
            role = operation.get("x-grandbo-role")
            assert (f"**{role}**" if role else "Bearer") in section, heading
            for status in operation["responses"]:
                assert f"| {status} |" in section, f"{heading}: {status}"
            assert "| 429 |" in section
            assert "Retry-After" in section
    topic = document["components"]["schemas"]["QueryRequest"]["properties"]["topic"]
    assert topic.get("description"), "the query's topic has no description"
