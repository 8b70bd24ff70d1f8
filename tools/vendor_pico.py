"""Vendor Pico CSS into the console from the npm registry (`make vendor-css`).

    python tools/vendor_pico.py 2.1.1

`npm pack @picocss/pico@VERSION` fetches the package's tarball; its sha512 must equal the
integrity the registry publishes (`npm view ... dist.integrity`). The classless build and
the licence are copied into `shared/grandbo/console/static/vendor/pico/`, unchanged. Pico
draws its form icons as `data:` SVG images, which the console's Content-Security-Policy
(`img-src 'self'`) refuses: each `--pico-icon-*` image is written as a file of its own
(`icons/NAME.svg`, `icons/NAME-2.svg` for a theme's second definition of it), and the
console serves `pico.console.min.css`: the stylesheet with each image pointing at its file
(no `data:` image reaches a browser, whatever the order its stylesheets arrive in).
`VENDORED.json` records where each file came from and its SHA-256; a unit test holds the
files, the icons and console.css to it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from urllib.parse import unquote

PACKAGE = "@picocss/pico"
TARGET = Path(__file__).resolve().parent.parent / "shared/grandbo/console/static/vendor/pico"
FILES = {
    "pico.classless.min.css": "package/css/pico.classless.min.css",
    "LICENSE.md": "package/LICENSE.md",
}
_ICON = re.compile(r"--pico-icon-([a-z-]+):url\(\"data:image/svg\+xml,([^\"]*)\"\)")


def icons(css: str) -> list[tuple[str, bytes]]:
    """Each `--pico-icon-NAME` image of the stylesheet, in order, as its file's name
    (`NAME.svg`, then `NAME-2.svg`... for a later theme's definition) and its SVG bytes."""
    seen: dict[str, int] = {}
    found: list[tuple[str, bytes]] = []
    for name, data in _ICON.findall(css):
        seen[name] = seen.get(name, 0) + 1
        suffix = "" if seen[name] == 1 else f"-{seen[name]}"
        found.append((f"{name}{suffix}.svg", unquote(data).encode()))
    return found


def served(css: str) -> str:
    """The stylesheet the console serves: each icon's `data:` image replaced by its file
    (beside the stylesheet, in `icons/`), in the order `icons` names them."""
    names = iter(name for name, _ in icons(css))
    return _ICON.sub(lambda m: f'--pico-icon-{m.group(1)}:url("icons/{next(names)}")', css)


def _npm() -> str:
    found = shutil.which("npm")
    if found is None:
        raise SystemExit("npm is needed to vendor from the npm registry")
    return found


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main(version: str) -> int:
    with tempfile.TemporaryDirectory() as folder:
        packed = subprocess.run(  # noqa: S603 (npm, the package, a version)
            [_npm(), "pack", f"{PACKAGE}@{version}", "--json"],
            cwd=folder,
            check=True,
            capture_output=True,
            text=True,
        )
        filename = json.loads(packed.stdout)[0]["filename"]
        tarball = (Path(folder) / filename).read_bytes()
        view = subprocess.run(  # noqa: S603
            [_npm(), "view", f"{PACKAGE}@{version}", "dist", "--json"],
            check=True,
            capture_output=True,
            text=True,
        )
        dist = json.loads(view.stdout)
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
        if integrity != dist["integrity"]:
            print(f"the tarball's {integrity} is not the registry's", file=sys.stderr)
            return 1
        record: dict[str, object] = {
            "package": PACKAGE,
            "version": version,
            "license": "MIT",
            "tarball": dist["tarball"],
            "integrity": integrity,
        }
        files: dict[str, dict[str, str]] = {}
        with tarfile.open(fileobj=io.BytesIO(tarball)) as archive:
            for name, member in FILES.items():
                extracted = archive.extractfile(member)
                assert extracted is not None, member
                data = extracted.read()
                (TARGET / name).write_bytes(data)
                files[name] = {"from": member, "sha256": _sha256(data)}
    (TARGET / "icons").mkdir(exist_ok=True)
    css = (TARGET / "pico.classless.min.css").read_text()
    for name, svg in icons(css):
        (TARGET / "icons" / name).write_bytes(svg)
        files[f"icons/{name}"] = {
            "from": f"--pico-icon-{name.removesuffix('.svg')} of the stylesheet",
            "sha256": _sha256(svg),
        }
    console_css = served(css).encode()
    (TARGET / "pico.console.min.css").write_bytes(console_css)
    files["pico.console.min.css"] = {
        "from": "pico.classless.min.css, each icon pointing at its file",
        "sha256": _sha256(console_css),
    }
    record["files"] = files
    (TARGET / "VENDORED.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"vendored {PACKAGE}@{version}: {len(files)} files in {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "2.1.1"))
