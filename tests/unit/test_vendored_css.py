"""The console's vendored Pico CSS (issue 45): the files are the npm package's, as
VENDORED.json records them; its form icons are files of the console's own, each the image
the stylesheet carries; the stylesheet the console serves is the package's with each icon
pointing at its file, so no `data:` image meets the Content-Security-Policy
(`img-src 'self'`), whatever order the page's stylesheets arrive in."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "shared/grandbo/console/static"
VENDOR = STATIC / "vendor/pico"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vendor_pico", ROOT / "tools/vendor_pico.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_vendored_file_is_the_one_recorded() -> None:
    record = json.loads((VENDOR / "VENDORED.json").read_text())
    assert record["package"] == "@picocss/pico"
    assert record["tarball"].startswith("https://registry.npmjs.org/@picocss/pico/-/")
    assert record["integrity"].startswith("sha512-")
    on_disk = {
        str(path.relative_to(VENDOR))
        for path in VENDOR.rglob("*")
        if path.is_file() and path.name != "VENDORED.json"
    }
    assert on_disk == set(record["files"])
    for name, facts in record["files"].items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == facts["sha256"], name
    css = (VENDOR / "pico.classless.min.css").read_text()
    assert f"Pico CSS ✨ v{record['version']}" in css


def test_the_served_stylesheet_is_the_packages_with_its_icons_as_files() -> None:
    tool = _tool()
    css = (VENDOR / "pico.classless.min.css").read_text()
    icons = tool.icons(css)
    # every data: image of the package's stylesheet is one of its icon variables
    assert css.count('url("data:') == len(icons) >= 10
    for name, svg in icons:
        assert (VENDOR / "icons" / name).read_bytes() == svg, name
        assert svg.startswith(b"<svg"), name
    served = (VENDOR / "pico.console.min.css").read_text()
    assert served == tool.served(css)
    assert "data:" not in served
    referenced = re.findall(r'url\("icons/([^"]+)"\)', served)
    assert referenced == [name for name, _ in icons]


def test_the_pages_load_the_served_stylesheet_before_the_consoles_own_rules() -> None:
    for template in ("base.html", "login.html"):
        page = (ROOT / "shared/grandbo/console/templates" / template).read_text()
        pico = page.index('href="/static/vendor/pico/pico.console.min.css"')
        own = page.index('href="/static/console.css"')
        assert pico < own, template
        assert "pico.classless" not in page, template
    console = (STATIC / "console.css").read_text()
    assert 'url("data:' not in console
    assert 'url("http' not in console
