"""The console's vendored Pico CSS (issue 45): the files are the npm package's, as
VENDORED.json records them; its form icons are files of the console's own, each the image
the stylesheet carries; console.css points every icon the stylesheet uses at one, so no
`data:` image meets the Content-Security-Policy (`img-src 'self'`)."""

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


def test_the_icons_are_the_stylesheets_own_and_console_css_uses_each() -> None:
    css = (VENDOR / "pico.classless.min.css").read_text()
    icons = _tool().icons(css)
    # every data: image of the stylesheet is one of its icon variables (each overridden)
    images = css.count('url("data:')
    assert images == len(re.findall(r'--pico-icon-[a-z-]+:url\("data:', css)), images
    assert images >= len(icons) >= 10
    console = (STATIC / "console.css").read_text()
    for name, svg in icons.items():
        assert (VENDOR / "icons" / f"{name}.svg").read_bytes() == svg, name
        assert svg.startswith(b"<svg"), name
        declaration = f'--pico-icon-{name}: url("/static/vendor/pico/icons/{name}.svg") !important;'
        assert declaration in console, name
    # nothing else in console.css reaches off the console's own address
    assert 'url("data:' not in console
    assert 'url("http' not in console


def test_the_page_loads_pico_before_the_consoles_own_rules() -> None:
    base = (ROOT / "shared/grandbo/console/templates/base.html").read_text()
    pico = base.index('href="/static/vendor/pico/pico.classless.min.css"')
    own = base.index('href="/static/console.css"')
    assert pico < own
