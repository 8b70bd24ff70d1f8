"""The retrieval log written off the answer's path (issue 36, point 3).

A query hands its retrieval to this container's writer thread and answers at once; the
thread writes what arrives within GATHER_S in one round trip on a connection of its own
(self-scoped statements, migration 0032). `dropped` counts what it had to drop: a queue
over MAX_PENDING, a database out of reach after ATTEMPTS tries (the writer failing over, or
demoted to read-only). What it dropped is also kept per organization and day and filed
with its next write that succeeds (`unlogged`, migration 0038), so the health page and the
settings count the log's gap once the writer is back; an answer never waits for it.

Lambda may freeze a container once an invocation ends, and reclaim it frozen: a
retrieval still pending then would be lost. There the writer gathers nothing, and the
query functions' internal extension (grandbo.runtime.after_answer) ends each invocation
only after the writer drained, once the answer has gone. Where no extension could be
registered, the query waits for its retrieval's write instead
(LambdaRuntime.query_org_memory, at most DURABLE_WAIT_S): durable, at the cost of that
write on the answer's path.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, date
from typing import Any

import psycopg

from grandbo.errors import StoreUnavailableError
from grandbo.memory.domain.retrieval_log import RetrievalRecord
from grandbo.memory.repository.retrievals import RetrievalLog

_log = logging.getLogger(__name__)

MAX_PENDING = 1000
ATTEMPTS = 3
BATCH = 50  # retrievals written in one round trip at most
GATHER_S = 0.2
DURABLE_WAIT_S = 0.5


class RetrievalWriter:
    """One thread, one connection, a bounded queue of retrievals to write."""

    def __init__(
        self, connect: Callable[[], psycopg.Connection[Any]], *, gather_s: float = GATHER_S
    ) -> None:
        self._connect = connect
        self._gather_s = gather_s
        self._queue: queue.Queue[RetrievalRecord] = queue.Queue(maxsize=MAX_PENDING)
        self._conn: psycopg.Connection[Any] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._done = threading.Condition()  # notified as each batch is written
        self.written = 0
        self.dropped = 0
        # what was dropped, per organization and day (UTC), not yet filed
        self._gaps: dict[tuple[str, date], int] = {}
        self._closed = False  # closed: nothing more is written, no connection opened

    def submit(self, record: RetrievalRecord) -> None:
        """Hand a retrieval over; never waits, never raises."""
        if self._closed:
            self._lost([record])
            return
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self._lost([record])
            _log.warning("retrieval log: %s pending, one dropped", MAX_PENDING)
            return
        self._ensure_thread()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every retrieval handed over is written (or dropped); False if
        `timeout_s` passed first."""
        with self._done:
            return self._done.wait_for(lambda: not self._queue.unfinished_tasks, timeout_s)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="grandbo-retrieval-log", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            # what arrives within GATHER_S goes in the same round trip: under load one
            # write for many queries, at rest a retrieval is written GATHER_S late
            until = time.monotonic() + self._gather_s
            while len(batch) < BATCH:
                left = until - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.append(self._queue.get(timeout=left))
                except queue.Empty:
                    break
            try:
                self._write(batch)
            finally:
                with self._done:
                    for _ in batch:
                        self._queue.task_done()
                    self._done.notify_all()

    def _write(self, batch: list[RetrievalRecord]) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            if self._closed:  # the runtime is gone: no connection opened after it
                self._lost(batch)
                return
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._conn = self._connect()
                    if self._closed:  # closed while it connected: nothing opened after it
                        self._conn.close()
                        self._lost(batch)
                        return
                RetrievalLog(self._conn).log_retrievals(batch)
                self.written += len(batch)
                self._file_gaps(self._conn)
                return
            except StoreUnavailableError as exc:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                if attempt == ATTEMPTS:
                    self._lost(batch)
                    _log.warning("retrieval log: not written after %s tries: %s", ATTEMPTS, exc)
                    return
                time.sleep(0.05 * attempt)
            except Exception:
                # a row the table refuses rolled its whole round trip back (one implicit
                # transaction): the others are written one by one, the refused one dropped
                if len(batch) > 1:
                    for record in batch:
                        self._write([record])
                    return
                self._lost(batch)
                _log.exception("retrieval log: a retrieval could not be written")
                return

    def _lost(self, batch: list[RetrievalRecord]) -> None:
        """Count what could not be written, per organization and day, to file later."""
        with self._lock:
            self.dropped += len(batch)
            for record in batch:
                key = (record.tenant_id, record.at.astimezone(UTC).date())
                self._gaps[key] = self._gaps.get(key, 0) + 1

    def _file_gaps(self, conn: psycopg.Connection[Any]) -> None:
        """File the counted gap with a write that succeeded; kept for the next if not."""
        with self._lock:
            gaps, self._gaps = self._gaps, {}
        if not gaps:
            return
        try:
            RetrievalLog(conn).count_unlogged(gaps)
        except Exception:  # a schema before 0038, or the writer gone again: kept
            with self._lock:
                for key, n in gaps.items():
                    self._gaps[key] = self._gaps.get(key, 0) + n
            _log.warning("retrieval log: the gap of %s could not be filed yet", sum(gaps.values()))

    def close(self, flush_s: float = 2.0) -> None:
        """Write what is pending (at most `flush_s`), then close: what comes later is
        dropped, and the thread opens no connection again."""
        self.flush(flush_s)
        self._closed = True
        if self._conn is not None:
            self._conn.close()
