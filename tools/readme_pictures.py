"""The README's picture and its quickstart output, from what `make run` serves: the demo
organization with the local model (issue 53, point 4: the picture showed a test fixture).

    .venv/bin/python -m tools.readme_pictures

starts `grandbo serve` on a data directory of its own and free ports (the demo seeded,
the local MiniLM model), asks the README's question from the command line and in the
console (Debian's headless Chromium), then writes docs/readme-search.png and the text
block between the README's `readme-pictures` markers. It prints how long each step took.
Nothing here runs in the tests: the picture is checked in, the command regenerates it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PICTURE = ROOT / "docs" / "readme-search.png"
QUESTION = (
    "checkout requests are timing out and the payment service logs show it cannot get a "
    "database connection since the afternoon deploy"
)
BEGIN, END = "<!-- readme-pictures: begin -->", "<!-- readme-pictures: end -->"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _serving(data_dir: Path) -> Iterator[tuple[list[str], str]]:
    """`grandbo serve` as `make run` starts it (the default provider: the local model):
    the lines it printed up to its console link, and the link."""
    port, console_port = _free_port(), _free_port()
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [
            *(sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir), "serve"),
            *("--port", str(port), "--console-port", str(console_port)),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "GRANDBO_EMBEDDING_PROVIDER"},
    )
    assert process.stdout is not None
    lines: list[str] = []
    link = ""
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if "/login?token=" in line:
                link = line.strip()
                break
        if not link:
            raise SystemExit("grandbo serve ended before its console link:\n" + "\n".join(lines))
        yield lines, link
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)


def _query(data_dir: Path) -> str:  # the command line's answer, beside the runner
    done = subprocess.run(  # noqa: S603 - our own CLI
        [
            *(sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir)),
            *("query", "--tenant", "demo", QUESTION),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "GRANDBO_EMBEDDING_PROVIDER"},
    )
    return done.stdout


def _picture(link: str, target: Path) -> None:
    from playwright.sync_api import sync_playwright

    base = link.split("/login")[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 1200, "height": 820})
        page.goto(link)  # the operator's link signs in at once (a person's asks first)
        if page.locator("#confirm-sign-in").count():
            page.click("#confirm-sign-in button[type=submit]")
            page.wait_for_load_state()
        page.goto(f"{base}/?topic={QUESTION.replace(' ', '+')}")
        page.locator("li.hit").first.wait_for()
        page.screenshot(path=str(target))
        browser.close()


def _block(served: list[str]) -> str:
    """The README's "what to expect": what `make run` printed, from the demo's line to the
    first hit of the question it asks, then its serving lines (credentials elided)."""
    begin = next(i for i, line in enumerate(served) if line.startswith("demo organization"))
    first_hit = next(i for i, line in enumerate(served) if line.startswith("1. "))
    text_lines = [*served[begin : first_hit + 1], "..."]
    start = served.index(next(x for x in served if "is serving on" in x))
    # the serving lines, the ready-to-paste curl commands (credentials) elided
    serving = [
        *served[start : start + 2],
        "...",
        *(re.sub(r"token=\S+", "token=...", line) for line in served[-2:]),
    ]
    port = re.search(r"http://127\.0\.0\.1:(\d+)", serving[0])
    console = re.search(r"http://127\.0\.0\.1:(\d+)/login", serving[-1])
    text = "\n".join([*text_lines, *serving])
    # the ports `make run` uses, not this run's
    if port:
        text = text.replace(f"127.0.0.1:{port.group(1)}", "127.0.0.1:8787")
    if console:
        text = text.replace(f"127.0.0.1:{console.group(1)}", "127.0.0.1:8790")
    text = re.sub(r"\S+/\.grandbo/", ".grandbo/", text)
    return "```text\n" + text + "\n```"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-readme", action="store_true", help="the picture only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="grandbo-readme-") as scratch:
        data_dir = Path(scratch) / ".grandbo"
        started = time.monotonic()
        with _serving(data_dir) as (served, link):
            ready = time.monotonic() - started
            asked = time.monotonic()
            _query(data_dir)  # the README's question from the command line, timed
            answered = time.monotonic() - asked
            _picture(link, PICTURE)
    print(f"first start to the console's link: {ready:.1f} s; the question: {answered:.1f} s")
    print(f"wrote {PICTURE.relative_to(ROOT)} ({PICTURE.stat().st_size // 1024} KiB)")
    if not args.no_readme:
        readme = README.read_text()
        start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
        README.write_text(readme[:start] + "\n" + _block(served) + "\n" + readme[end:])
        print(f"wrote the quickstart's output into {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
