"""The README's examples run as written, against a local runner (issue 34, point 12): the
CLI block (every command of it, the example files it names, a signed `curl` from
`grandbo sign --curl`, `eval` on the set the repository ships) and the incident-closed
`curl` to the local door. Only the runner's port and data directory are this test's."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .test_serve_process import _port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block_after(marker: str) -> str:
    """The first ```sh block after `marker` in the README."""
    found = re.search(re.escape(marker) + r".*?```sh\n(.*?)```", README, re.S)
    assert found is not None, f"no sh block after {marker!r} in the README"
    return found.group(1)


def _start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [
            *(sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir)),
            *("--provider", "fake", "serve", "--port", str(port), "--no-console"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert process.stdout is not None
    for line in process.stdout:  # it prints its examples once it listens
        if b"Grandbo is serving on" in line:
            return process
    raise AssertionError("grandbo serve did not start")


@pytest.mark.skipif(os.environ.get("GRANDBO_TEST_DATABASE_URL") is not None, reason="embedded")
def test_the_readmes_examples_run_as_written_against_a_local_runner(tmp_path: Path) -> None:
    assert (ROOT / "examples" / "incident.json").is_file()
    assert (ROOT / "examples" / "topology.json").is_file()
    assert (ROOT / ".venv" / "bin" / "grandbo").exists(), "make install first"
    data_dir, port = tmp_path / "data", _port()
    # a clone's layout, with the files the commands write kept out of the repository
    for name in (".venv", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    runner = _start(data_dir, port)
    try:
        script = "\n".join(
            [
                _block_after("The CLI works on the same store"),
                _block_after("`examples/incident.json` is one"),
            ]
        )
        # the runner's port and data directory are this test's
        script = (
            script.replace("127.0.0.1:8787", f"127.0.0.1:{port}")
            .replace(".grandbo/", f"{data_dir}/")
            .replace("--curl", f"--curl --url http://127.0.0.1:{port}")
        )
        env = {
            **os.environ,
            "GRANDBO_DATA_DIR": str(data_dir),
            "GRANDBO_EMBEDDING_PROVIDER": "fake",
        }
        done = subprocess.run(  # noqa: S603 - the README's own commands
            ["bash", "-e", "-c", script],  # noqa: S607
            cwd=tmp_path,
            env={**env, "PATH": f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=30)
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    assert "BrokenPipe" not in done.stderr
    assert "embedded: searchable by meaning now" in out  # the add said it is searchable
    assert "revision 2" in out  # the correction kept what it did not name
    assert '"nodes_upserted"' in out or "nodes" in out  # the topology file loaded
    assert "equals the replay" in out
    assert '"entry_id"' in out  # the signed curl created an entry
    assert "hybrid" in out  # eval's table
    assert '"created": 1' in out or '"created":1' in out  # the incident's one finding


@pytest.mark.skipif(os.environ.get("GRANDBO_TEST_DATABASE_URL") is not None, reason="embedded")
def test_the_http_references_curl_per_task_runs_as_written(tmp_path: Path) -> None:
    """Issue 53: the HTTP API reference's `curl` of each task, against a local runner
    (only its port and data directory are this test's), answers 2xx with JSON."""
    from tests.unit.test_docs_site import reference_pages

    _, curls = reference_pages()
    assert len(curls) == 5
    data_dir, port = tmp_path / "data", _port()
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    runner = _start(data_dir, port)
    env = {**os.environ, "GRANDBO_DATA_DIR": str(data_dir), "GRANDBO_EMBEDDING_PROVIDER": "fake"}
    try:
        for task, command in curls.items():
            script = command.replace("127.0.0.1:8787", f"127.0.0.1:{port}").replace(
                "--curl", f"--curl --url http://127.0.0.1:{port}"
            )
            # the answer's status on its own line after the body
            script = script.replace("curl -s", "curl -s -w '\\n%{http_code}'").replace(
                "| sh", "| sed \"s/^curl /curl -w '\\\\n%{http_code}' /\" | sh"
            )
            done = subprocess.run(  # noqa: S603 - the reference's own commands
                ["bash", "-e", "-o", "pipefail", "-c", script],  # noqa: S607
                cwd=tmp_path,
                env={**env, "PATH": f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, f"{task}: {done.stdout}\n{done.stderr}"
            body, _, status = done.stdout.rstrip().rpartition("\n")
            assert status.startswith("2"), f"{task}: {status} {body}"
            assert isinstance(json.loads(body), dict), task
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=30)
