"""Waiting for a process to be ready (again): polled until it says so, within a generous
overall deadline, never a fixed sleep. A loaded machine restarts a server, or stops one,
many times slower than an idle one; a test that waits for a fixed time fails there."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# long enough for two CPU-bound processes beside the suite on 2 cores; a server that is
# really broken still fails, only later
READY_WITHIN_S = 180.0
POLL_S = 0.3


def until_ready(
    probe: Callable[[], T | None],
    what: str,
    *,
    within_s: float = READY_WITHIN_S,
    not_yet: tuple[type[Exception], ...] = (),
) -> T:
    """`probe()`'s first answer that is not None; an exception of `not_yet` counts as no
    answer yet (a refused or timed-out connection while a server restarts). An
    AssertionError naming `what`, and the last such exception, past the deadline."""
    deadline = time.monotonic() + within_s
    last: Exception | None = None
    while True:
        try:
            answer = probe()
        except not_yet as exc:
            answer, last = None, exc
        if answer is not None:
            return answer
        if time.monotonic() >= deadline:
            seen = f" (last: {type(last).__name__}: {last})" if last is not None else ""
            raise AssertionError(f"{what}: not within {within_s:.0f} s{seen}")
        time.sleep(POLL_S)
