"""A call to a model (an embedding, a reranking) bounded by a deadline.

Each call runs on a thread of its own, so a hung provider can only ever delay itself,
never queue the next query's call behind it; the threads are bounded per kind of call for
the whole process, so past that many calls still outstanding (a hung provider) a query
gives up at once instead of leaving one more behind.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")

# How long a process that is exiting waits for the calls still running on these threads: a
# native runtime (onnxruntime) torn down under a running call aborts the whole process
# ("terminate called without an active exception", exit 134: issue 43)
EXIT_WAIT_S = 5.0
_running: set[threading.Thread] = set()
_running_lock = threading.Lock()


@atexit.register
def _wait_for_running_calls() -> None:
    """At exit, the calls still running finish first (at most EXIT_WAIT_S in all)."""
    ends = time.monotonic() + EXIT_WAIT_S
    with _running_lock:
        threads = list(_running)
    for thread in threads:
        thread.join(max(0.0, ends - time.monotonic()))


class DeadlineExceeded(Exception):  # noqa: N818 - reads as what happened
    """The call did not answer in time, or too many earlier calls are still outstanding."""


def call_with_deadline(
    call: Callable[[], T],
    timeout_s: float,
    slots: threading.BoundedSemaphore,
    *,
    what: str,
    outstanding: int,
    thread_name: str,
) -> T:
    """`call()`'s result within `timeout_s`; its own exception if it raised one.
    `slots` (of `outstanding`) bounds the calls of this kind still running."""
    if not slots.acquire(blocking=False):
        raise DeadlineExceeded(
            f"{what} skipped: {outstanding} earlier calls to the provider are still outstanding"
        )
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except Exception as exc:  # handed to the waiting caller
            future.set_exception(exc)
        except BaseException as exc:  # SystemExit and the like end this thread, not the caller
            future.set_exception(DeadlineExceeded(f"{what} aborted: {type(exc).__name__}"))
        finally:
            slots.release()
            with _running_lock:
                _running.discard(threading.current_thread())

    thread = threading.Thread(target=run, name=thread_name, daemon=True)
    with _running_lock:
        _running.add(thread)
    thread.start()
    try:
        return future.result(timeout=timeout_s)
    except FutureTimeout:
        raise DeadlineExceeded(f"{what} timed out after {timeout_s}s") from None
