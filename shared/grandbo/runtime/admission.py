"""Each caller's questions per minute, counted where it costs nothing: in the process that
answers (issue 51).

A question never waits on the writer: the count is this process's own (every door and
container of a local runner, one Lambda container in AWS), over a sliding minute (the last
full minute's count weighed by how much of it the window still covers, plus this minute's:
no edge lets twice the rate through), against the organization's rate read with the
query's own settings (`QueryReads.query_rate`, no statement of its own). What the count
cannot see (another Lambda container, another process) the edge bounds: the WAF's
per-token rate on the query route (infra/waf.py) is the shared backstop.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

WINDOW_S = 60.0
# callers kept in memory at most; past it, those idle longest are forgotten first
MAX_CALLERS = 100_000


@dataclass(slots=True)
class _Window:
    minute: int  # the fixed minute `current` counts
    current: int
    previous: int  # the fixed minute before it


class SlidingMinute:
    """Admit a caller's question within `rate` per sliding minute, or say how long to
    wait. Thread-safe; a refused question is not counted (a caller that waits is served
    at its rate, one that keeps knocking is not admitted sooner)."""

    def __init__(self, max_callers: int = MAX_CALLERS) -> None:
        self._windows: dict[tuple[str, str], _Window] = {}
        self._lock = threading.Lock()
        self._max_callers = max_callers

    def admit(self, tenant_id: str, caller: str, rate: int, now: float) -> float:
        """0 when admitted (and counted), else the seconds until it would be."""
        minute = math.floor(now / WINDOW_S)
        into = now / WINDOW_S - minute  # how far into this minute, 0..1
        key = (tenant_id, caller)
        with self._lock:
            window = self._windows.pop(key, None)  # re-inserted: most recent last
            if window is None or window.minute < minute - 1:
                window = _Window(minute, 0, 0)
            elif window.minute == minute - 1:
                window = _Window(minute, 0, window.current)
            weighed = window.previous * (1.0 - into) + window.current
            self._windows[key] = window
            # bounded whatever callers come: the one idle longest is forgotten first
            while len(self._windows) > self._max_callers:
                del self._windows[next(iter(self._windows))]
            if weighed + 1 <= rate:
                window.current += 1
                return 0.0
            return _wait(window, into, rate)


def _wait(window: _Window, into: float, rate: int) -> float:
    """Seconds until the weighed count leaves room for one more question: later in this
    minute as the last one's weight fades, else in the next, as this one's does."""
    room = rate - 1 - window.current
    if room >= 0 and window.previous > 0:
        # previous * (1 - t) <= room, for t the fraction of this minute passed
        t = 1.0 - room / window.previous
        if t < 1.0:
            return max((t - into) * WINDOW_S, 0.001)
    # in the next minute: current * (1 - t) <= rate - 1
    t_next = max(0.0, 1.0 - (rate - 1) / window.current) if window.current else 0.0
    return max((1.0 - into + t_next) * WINDOW_S, 0.001)
