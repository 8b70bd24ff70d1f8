"""The README's quickstart as written (issue 45): `make run PORT=... CONSOLE_PORT=...` on a
fresh data directory, on ports that are not the defaults, shows what the README says to
expect, on those ports; and a second one on the same port is refused at once, naming it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from .test_serve_process import _port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _expected() -> list[str]:
    found = re.search(
        r"What to expect, after the install:\n\n(?:<!--[^\n]*-->\n)?```text\n(.*?)```", README, re.S
    )
    assert found is not None, "the README's quickstart shows no output to expect"
    return [line for line in found.group(1).splitlines() if line.strip()]


def _make_run(data_dir: Path, port: int, console: int) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - the README's own command
        ["make", "run", f"PORT={port}", f"CONSOLE_PORT={console}"],  # noqa: S607
        cwd=ROOT,
        env={
            **os.environ,
            "GRANDBO_DATA_DIR": str(data_dir),
            "GRANDBO_EMBEDDING_PROVIDER": "local",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # make and its server stop together
    )


@pytest.mark.skipif(os.environ.get("GRANDBO_TEST_DATABASE_URL") is not None, reason="embedded")
def test_the_quickstart_shows_what_the_readme_says_on_other_ports(tmp_path: Path) -> None:
    assert (ROOT / ".venv" / ".installed").exists(), "make install first"
    data_dir, port, console = tmp_path / "data", _port(), _port()
    runner = _make_run(data_dir, port, console)
    shown: list[str] = []
    try:
        assert runner.stdout is not None
        deadline = time.monotonic() + 300
        for line in runner.stdout:
            shown.append(line.rstrip("\n"))
            if "/login?token=" in line or time.monotonic() > deadline:
                break
        output = "\n".join(shown)
        for expected in _expected():
            line = (
                expected.replace("127.0.0.1:8787", f"127.0.0.1:{port}")
                .replace("127.0.0.1:8790", f"127.0.0.1:{console}")
                .replace(".grandbo/", f"{data_dir}/")
            )
            if line.endswith("..."):
                line = line[:-3]
            assert line.strip() in output, f"the README shows {line!r}; the run showed:\n{output}"
        # what it recorded: the commands that talk to it find it on these ports
        served = (data_dir / "serving.json").read_text()
        assert f"127.0.0.1:{port}" in served
        assert f"127.0.0.1:{console}" in served

        env = {**os.environ, "GRANDBO_DATA_DIR": str(data_dir)}
        grandbo = str(ROOT / ".venv" / "bin" / "grandbo")
        signed = subprocess.run(  # noqa: S603 - our own CLI
            [grandbo, "sign", "POST", "/v1/admin/entries", "--curl", "--body", "{}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert f"http://127.0.0.1:{port}/v1/admin/entries" in signed.stdout
        person = subprocess.run(  # noqa: S603 - our own CLI
            [grandbo, "people", "add", "ann@example.com", "--tenant", "demo", "--role", "viewer"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert f"http://127.0.0.1:{console}/login?token=" in person.stdout

        where = subprocess.run(  # noqa: S603 - our own CLI
            [grandbo, "serving"], env=env, capture_output=True, text=True, timeout=60, check=True
        )
        assert where.stdout.strip() == f"http://127.0.0.1:{port}"

        # a second runner on this data directory stops at once, naming the one serving it
        again = subprocess.run(  # noqa: S603 - the README's own command
            ["make", "run", f"PORT={_port()}", f"CONSOLE_PORT={_port()}"],  # noqa: S607
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert again.returncode != 0
        assert "this data directory's Grandbo" in again.stderr
        assert "already serves" in again.stderr
        assert "demo organization" not in again.stdout  # refused before any other work

        # a busy port held by anything else is named, and nobody is blamed for it
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", 0))
            squatter.listen(1)
            taken = squatter.getsockname()[1]
            other = subprocess.run(  # noqa: S603 - our own CLI
                [grandbo, "serve", "--port", str(taken), "--console-port", str(_port())],
                env={**os.environ, "GRANDBO_DATA_DIR": str(tmp_path / "other")},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        assert other.returncode == 2
        assert f"port {taken} on 127.0.0.1 is in use" in other.stderr
        assert "Grandbo (pid" not in other.stderr
    finally:
        os.killpg(runner.pid, signal.SIGTERM)
        runner.wait(timeout=60)
