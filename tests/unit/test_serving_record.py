"""The runner's record of where it serves (`.grandbo/serving.json`, issue 45): believed
only while its process lives and is a Grandbo runner, so a runner killed without its
cleanup, whose pid another program has since, sends nobody to a dead address."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grandbo.local import serving


def _exec_done(child: subprocess.Popen[bytes], marker: bytes) -> None:
    """Wait until the child has exec'd: its command line is the parent's until then."""
    deadline = time.monotonic() + 10
    cmdline = Path(f"/proc/{child.pid}/cmdline")
    while marker not in cmdline.read_bytes():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.01)


def _record(data_dir: Path, pid: int) -> None:
    (data_dir / "serving.json").write_text(
        json.dumps(
            {
                "pid": pid,
                "api": "http://127.0.0.1:9300",
                "console": "http://127.0.0.1:9301",
                "data_dir": str(data_dir),
            }
        )
    )


def test_a_record_of_this_process_is_believed_and_forgotten(tmp_path: Path) -> None:
    serving.record(tmp_path, "http://127.0.0.1:9300", "http://127.0.0.1:9301")
    assert serving.api_url(tmp_path, None) == "http://127.0.0.1:9300"
    serving.forget(tmp_path)
    assert serving.running(tmp_path) is None
    assert serving.api_url(tmp_path, None) == serving.API_URL


def test_a_record_whose_pid_is_another_program_now_is_not(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _record(tmp_path, other.pid)
        assert serving.running(tmp_path) is None
        assert serving.api_url(tmp_path, None) == serving.API_URL
    finally:
        other.kill()
        other.wait()


def test_a_record_of_a_live_grandbo_process_is_believed(tmp_path: Path) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "grandbo-serve"]
    )
    try:
        _exec_done(runner, b"grandbo-serve")
        _record(tmp_path, runner.pid)
        found = serving.running(tmp_path)
        assert found is not None
        assert found.pid == runner.pid
        assert serving.console_url(tmp_path, None) == "http://127.0.0.1:9301"
    finally:
        runner.kill()
        runner.wait()
    assert serving.running(tmp_path) is None  # gone: its record is not believed


def test_a_record_whose_pid_now_runs_another_grandbo_process_is_not_believed(
    tmp_path: Path,
) -> None:
    """Issue 45's review: a killed runner's pid taken by another process whose command line
    names grandbo (`grandbo mcp`, an editor in a folder named grandbo): the record's start
    time is not that process's, so nobody is told to stop it."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "grandbo-mcp"])
    try:
        _exec_done(other, b"grandbo-mcp")
        record = json.loads(
            json.dumps(
                {
                    "pid": other.pid,
                    "api": "http://127.0.0.1:9300",
                    "console": None,
                    "data_dir": str(tmp_path),
                    "started": 1,
                }
            )
        )
        (tmp_path / "serving.json").write_text(json.dumps(record))
        assert serving.running(tmp_path) is None
        record["started"] = serving._started(other.pid)
        (tmp_path / "serving.json").write_text(json.dumps(record))
        assert serving.running(tmp_path) is not None  # its own start: believed
    finally:
        other.kill()
        other.wait()


def test_serve_refuses_one_port_for_both_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 45's review: `serve --port 9532 --console-port 9532` seeded the demo, then
    stopped with an OSError naming no port."""
    from grandbo.cli import main

    data_dir = tmp_path / "data"
    assert (
        main(["--data-dir", str(data_dir), "serve", "--port", "9532", "--console-port", "9532"])
        == 2
    )
    assert "cannot share port 9532" in capsys.readouterr().err
    assert not data_dir.exists()  # nothing started, nothing made


def test_serving_says_when_no_runner_serves_the_data_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grandbo.cli import main

    assert main(["--data-dir", str(tmp_path), "serving"]) == 0
    said = capsys.readouterr()
    assert said.out.strip() == serving.API_URL  # what a script reads: the default
    assert "no runner serves" in said.err
    serving.record(tmp_path, "http://127.0.0.1:9300", None)
    assert main(["--data-dir", str(tmp_path), "serving"]) == 0
    said = capsys.readouterr()
    assert (said.out.strip(), said.err) == ("http://127.0.0.1:9300", "")


def test_sign_curl_says_when_it_points_at_the_default_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 45's review: with no runner, `sign --curl | sh` exited 7 and said nothing."""
    from grandbo.cli import main

    argv = ["--data-dir", str(tmp_path), "sign", "GET", "/v1/admin/whoami", "--curl"]
    assert main(argv) == 0
    said = capsys.readouterr()
    assert serving.API_URL + "/v1/admin/whoami" in said.out
    assert "no runner serves" in said.err
    assert main([*argv, "--url", "http://127.0.0.1:9300"]) == 0  # told where: nothing said
    assert capsys.readouterr().err == ""


_LISTEN = (
    "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen();"
    " print(s.getsockname()[1], flush=True); time.sleep(30)"
)


@pytest.mark.parametrize(("name", "blamed"), [("grandbo-serve", True), ("someone-else", False)])
def test_a_busy_port_names_another_grandbo_holding_it_and_nobody_else(
    tmp_path: Path, name: str, blamed: bool
) -> None:
    """Issue 45: a busy port is refused in one line naming the Grandbo holding it, when it
    is one, also another data directory's (its process, from /proc); another program is
    never called a Grandbo."""
    holder = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", _LISTEN, name], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        port = int(holder.stdout.readline())
        said = serving.busy_port_message("127.0.0.1", port, "the API's", tmp_path)
        assert f"port {port} on 127.0.0.1 is in use" in said
        assert ("another Grandbo holds it" in said) is blamed, said
        if blamed:
            assert f"pid {holder.pid}" in said
            assert name in said
    finally:
        holder.kill()
        holder.wait()
