"""A call bounded by a deadline (`grandbo.memory.read.deadline`): the caller stops waiting at
the deadline, and a process that exits meanwhile lets the call finish first (a native
runtime torn down under a running call aborts the process: issue 43's exit 134)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grandbo.memory.read.deadline import DeadlineExceeded, call_with_deadline


def test_the_caller_stops_waiting_at_the_deadline() -> None:
    slots = threading.BoundedSemaphore(2)
    started = time.monotonic()

    with pytest.raises(DeadlineExceeded, match=r"timed out after 0\.05s"):
        call_with_deadline(
            lambda: time.sleep(0.5), 0.05, slots, what="a call", outstanding=2, thread_name="t"
        )

    assert time.monotonic() - started < 0.4


def test_an_exiting_process_lets_a_call_past_its_deadline_finish(tmp_path: Path) -> None:
    done = tmp_path / "finished"
    script = f"""
import threading, time
from pathlib import Path
from grandbo.memory.read.deadline import DeadlineExceeded, call_with_deadline

def slow():
    time.sleep(0.6)
    Path({str(done)!r}).write_text("yes")

try:
    call_with_deadline(slow, 0.01, threading.BoundedSemaphore(1), what="a call",
                       outstanding=1, thread_name="t")
except DeadlineExceeded:
    print("gave up waiting")
"""
    ran = subprocess.run(  # noqa: S603 - this interpreter
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "gave up waiting"
    assert done.read_text() == "yes", "the daemon thread was killed at exit"
