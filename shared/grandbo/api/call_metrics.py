"""Counters for calls made outside Lambda (the recall hook, the MCP server's tools).

Thread-safe, in memory, no dependencies: calls, results returned, outcomes counted by
name ("ok" or a failure's reason) and latency percentiles over the last calls.
`snapshot()` is what a caller exports to its own metrics system.
"""

from __future__ import annotations

import statistics
import threading
from collections import Counter, deque
from typing import Any

LATENCY_WINDOW = 2048


class CallMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls = 0
        self._returned = 0
        self._outcomes: Counter[str] = Counter()
        self._latencies_ms: deque[float] = deque(maxlen=LATENCY_WINDOW)

    def record(self, outcome: str, returned: int, latency_ms: float) -> None:
        with self._lock:
            self._calls += 1
            self._returned += returned
            self._outcomes[outcome] += 1
            self._latencies_ms.append(latency_ms)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            latencies = sorted(self._latencies_ms)
            return {
                "calls": self._calls,
                "returned": self._returned,
                "outcomes": dict(self._outcomes),
                "latency_ms_p50": _percentile(latencies, 50),
                "latency_ms_p95": _percentile(latencies, 95),
            }


def _percentile(ordered: list[float], percent: int) -> float | None:
    if len(ordered) < 2:
        return ordered[0] if ordered else None
    return round(statistics.quantiles(ordered, n=100, method="inclusive")[percent - 1], 3)
