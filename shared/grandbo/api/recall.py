"""The recall hook: before every model call, the few memories that matter, or nothing.

An agent loop calls `RecallHook.recall(text)` with what it is about to send to its model.
The hook turns that text into a valid topic, asks the query API for the best matches,
keeps at most `max_memories` above `min_score`, and returns a context block ready to
insert into the prompt, each memory with its confidence. When memory holds nothing close
(no hit reached the confidence floor) the block is empty: nothing is injected. It never
raises and never waits longer than `timeout_s`: a slow, dead, misconfigured or confused
memory service yields an empty block and a reason, and the investigation goes on without
it (fail-open, seed 004). The block carries the framing of seed 002: a past incident is a
hint to verify with live tools, never ground truth.

    hook = RecallHook("https://grandbo.example/prod", token)
    recall = hook.recall(prompt)
    if recall.block:
        prompt = recall.block + "\\n\\n" + prompt
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from grandbo.api.call_metrics import CallMetrics
from grandbo.api.client import GrandboHTTPError, MemoryClient
from grandbo.errors import GrandboError
from grandbo.memory.domain.fusion import LEXICAL_WEIGHT
from grandbo.memory.domain.topic import MAX_TOPIC_CHARS, validate_topic
from grandbo.text.rules import one_line, quoted

DEFAULT_TIMEOUT_S = 0.5
# After this many consecutive failures of the service itself (timeout, unreachable, 5xx),
# the hook stops asking for BREAKER_COOLDOWN_S: a dead memory service costs an agent
# nothing per model call instead of a timeout each; then one call tries again.
BREAKER_FAILURES = 3
BREAKER_COOLDOWN_S = 30.0
_SERVICE_DOWN = frozenset({"timeout", "unreachable", "server_error"})
DEFAULT_MAX_MEMORIES = 3
# A hit's fused score is 0-1, both legs' signals of the hit each divided by the best
# among the candidates and mixed (`grandbo.memory.domain.fusion`). This default is what the
# nearest entry sharing no tag with the topic scores (the vector leg's whole weight): it
# keeps that one and anything scoring as well, and drops matches weak on both legs.
DEFAULT_MIN_SCORE = round(1.0 - LEXICAL_WEIGHT, 6)
# The end of a prompt is what the agent works on now, and an embedder reads a bounded
# prefix (the local MiniLM: 256 tokens) and drops the rest. A 600-character tail is read
# whole: 217 tokens when it is log lines (the densest text measured), ~130 as prose.
DEFAULT_TOPIC_CHARS = 600
# The block goes into every model call: each memory's title and reasons are cut to a
# line, the block to a size a prompt can carry, and the answer read to what five hits
# can legitimately be (the API's 8 MB cap is for every client; the hook needs far less).
BLOCK_TITLE_CHARS = 200
BLOCK_SUMMARY_CHARS = 600
BLOCK_WHY_CHARS = 300
BLOCK_STALENESS_CHARS = 400
BLOCK_MAX_BYTES = 6_000
MAX_ANSWER_BYTES = 1024 * 1024
MAX_RECURRENCES = 1_000_000  # a count past it is malformed (a 4,200-digit one was sent)

FRAMING = (
    "Possibly relevant past incidents from Grandbo, the organization's memory. They are "
    "hints, not ground truth: verify each against live telemetry before relying on it."
)

# What the block says when the search was degraded (`metadata.searched`): fixed sentences
# of the hook's own, never the answer's free text
SEARCHED_NOTES = {
    "keywords_only": "Meaning search was unavailable for this question: these are keyword "
    "matches only, and a past incident worded differently may be missing.",
    "partial": "Some entries are not searchable by meaning yet: those could only match by "
    "keywords.",
}

FailOpenReason = Literal[
    "timeout",  # no complete answer within timeout_s
    "unreachable",  # connection refused, reset, DNS: the service is not there
    "unauthorized",  # 401: the token is wrong, expired or not a query token
    # 403: the API's edge refused the request before any token was checked (its WAF, a
    # resource policy); the token may be fine
    "forbidden",
    "rejected",  # another 4xx: the request was refused (its message is in `detail`)
    "server_error",  # 5xx
    "malformed_answer",  # the answer is not the query API's JSON document
    "invalid_topic",  # the text cannot be made into a topic (too few words)
    "circuit_open",  # the service failed repeatedly: not asked again until the cooldown ends
]
Reason = FailOpenReason | Literal["no_match"]

# control characters (Unicode Cc) and lone surrogates: never part of a topic or a block
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# ... nor, in the block, the marks that reorder text on screen (bidi overrides, isolates)
MAX_WORD_CHARS = 64
MAX_SCAN_CHARS = 1 << 20  # of a prompt's end: a megabyte without 4 words is not a topic


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    entry_id: str
    title: str
    summary: str
    age_days: float
    score: float
    why: str
    recurrences: int = 1  # how many times the lesson was recorded (an older server: 1)
    # what the topology says changed about the lesson's service, in words ("" when nothing)
    staleness: str = ""
    # the estimated probability that it is relevant (None: an older server sent none)
    confidence: float | None = None


@dataclass(frozen=True, slots=True)
class Recall:
    """What one recall produced. `block` is empty when `memories` is; `reason` says why."""

    block: str
    memories: tuple[RecalledMemory, ...]
    reason: Reason | None
    detail: str
    latency_ms: float

    @property
    def failed_open(self) -> bool:
        return self.reason is not None and self.reason != "no_match"


def topic_from_text(text: str, max_chars: int = DEFAULT_TOPIC_CHARS) -> str:
    """The end of `text` as a topic the query contract accepts, if it can be one.

    Keeps the last whole words (an agent's prompt ends with what it is working on now)
    within `max_chars` (at most the contract's limit). Control characters and lone
    surrogates separate words; a "word" over MAX_WORD_CHARS (a URL, a minified JSON line,
    base64) carries nothing to match on and is skipped. Only the end of the text is read,
    however long it is. Raises the contract's InvalidTopicError when what is left is not
    a topic (a slug, a title, too few words).
    """
    limit = max(1, min(max_chars, MAX_TOPIC_CHARS))
    end = len(text.rstrip())  # trailing whitespace, however long, is no window
    window = 4 * limit
    while True:
        start = max(0, end - window)
        words = _UNSAFE.sub(" ", text[start:end]).split()
        if start > 0 and words and not text[start - 1].isspace():
            words = words[1:]  # the window cut through it
        kept: list[str] = []
        length = -1
        full = False
        for word in reversed(words):
            if len(word) > MAX_WORD_CHARS:
                continue
            if length + 1 + len(word) > limit:
                full = True
                break
            kept.append(word)
            length += 1 + len(word)
        if full or start == 0 or window >= MAX_SCAN_CHARS:
            return validate_topic(" ".join(reversed(kept)))
        window *= 4  # the window held too few words: read further back


class RecallHook:
    """Recall for an agent loop: `recall(text)` never raises and returns within the timeout."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_memories: int = DEFAULT_MAX_MEMORIES,
        min_score: float = DEFAULT_MIN_SCORE,
        min_confidence: float | None = None,
        service: str | None = None,
        max_topic_chars: int = DEFAULT_TOPIC_CHARS,
        breaker_failures: int = BREAKER_FAILURES,
        breaker_cooldown_s: float = BREAKER_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < timeout_s <= 30:
            raise GrandboError("timeout_s must be in (0, 30] seconds")
        if not 1 <= max_memories <= 10:
            raise GrandboError("max_memories must be 1..10")
        self.client = MemoryClient(
            base_url,
            token,
            timeout=timeout_s,
            component="recall-hook",
            max_response_bytes=MAX_ANSWER_BYTES,
        )
        self.timeout_s = timeout_s
        self.max_memories = max_memories
        self.min_score = min_score
        # sent with each query: the server withholds hits under it (None: the floor the
        # organization set, else the confidence model's)
        self.min_confidence = min_confidence
        self.service = service
        self.max_topic_chars = max_topic_chars
        self.metrics = CallMetrics()  # outcomes: "ok" or the reason of an empty block
        self.breaker_failures = breaker_failures
        self.breaker_cooldown_s = breaker_cooldown_s
        self._clock = clock
        self._breaker = threading.Lock()
        self._failures = 0
        self._open_until = 0.0

    def recall(self, text: str, *, incident_id: str | None = None) -> Recall:
        """The block for `text`; `incident_id` (the agent's current incident) files the
        question in the organization's retrieval log under it."""
        started = time.perf_counter()
        with self._breaker:
            open_for = self._open_until - self._clock()
            if open_for > 0:
                recall = _empty(
                    "circuit_open",
                    f"the memory service failed {self._failures} times in a row; "
                    f"not asked for another {open_for:.0f} s",
                    started,
                )
                self.metrics.record("circuit_open", 0, recall.latency_ms)
                return recall
        try:
            recall = self._recall(text, started, incident_id)
        except Exception as exc:  # fail-open is the contract
            recall = _empty("malformed_answer", f"{type(exc).__name__}: {exc}", started)
        self._count(recall)
        self.metrics.record(recall.reason or "ok", len(recall.memories), recall.latency_ms)
        return recall

    def _count(self, recall: Recall) -> None:
        """Consecutive failures of the service open the breaker; an answer closes it."""
        with self._breaker:
            if recall.reason in _SERVICE_DOWN:
                self._failures += 1
                if self._failures >= self.breaker_failures:
                    self._open_until = self._clock() + self.breaker_cooldown_s
            elif recall.reason != "invalid_topic":  # the service answered
                self._failures = 0
                self._open_until = 0.0

    def _recall(self, text: str, started: float, incident_id: str | None = None) -> Recall:
        try:
            topic = topic_from_text(text if isinstance(text, str) else "", self.max_topic_chars)
        except GrandboError as exc:
            return _empty("invalid_topic", str(exc), started)
        outcome: list[Recall] = []

        def ask() -> None:
            try:
                answer = self.client.query_org_memory(
                    topic,
                    limit=max(self.max_memories, 5),
                    service=self.service,
                    min_confidence=self.min_confidence,
                    incident_id=incident_id,
                )
                outcome.append(self._memories(answer, started))
            except BaseException as exc:  # handed to the caller's thread
                outcome.append(_failure(exc, started))

        # the whole call runs in the worker, reading and parsing the answer and building
        # the block included, and the caller waits for it no longer than the timeout; the
        # client also closes its connection at the same deadline, which ends a worker held
        # by a slow or trickling server, and the worker bounds what a socket cannot (a
        # hung name lookup)
        worker = threading.Thread(target=ask, name="grandbo-recall", daemon=True)
        worker.start()
        worker.join(max(0.0, self.timeout_s - (time.perf_counter() - started)))
        if not outcome:
            return _empty("timeout", f"no complete answer within {self.timeout_s:g} s", started)
        return outcome[0]

    def _memories(self, answer: object, started: float) -> Recall:
        if not isinstance(answer, dict) or not isinstance(answer.get("hits"), list):
            return _empty("malformed_answer", "the answer has no list of hits", started)
        memories: list[RecalledMemory] = []
        for hit in answer["hits"]:
            memory = _memory(hit)
            if memory is None:
                return _empty("malformed_answer", "a hit lacks its fields", started)
            if memory.score >= self.min_score and len(memories) < self.max_memories:
                memories.append(memory)
        metadata = answer.get("metadata")
        searched = metadata.get("searched") if isinstance(metadata, dict) else None
        note = SEARCHED_NOTES.get(searched) if isinstance(searched, str) else None
        if not memories:
            if not answer["hits"] and note is not None:
                return _empty(
                    "no_match",
                    f"keyword search found nothing close and the search was not complete "
                    f"({searched}): not evidence that memory holds no precedent; nothing "
                    "injected",
                    started,
                )
            if not answer["hits"] and isinstance(metadata, dict) and metadata.get("no_precedent"):
                return _empty(
                    "no_match",
                    "memory holds nothing close (no hit reached the confidence "
                    "floor): nothing injected",
                    started,
                )
            return _empty("no_match", f"no memory scored {self.min_score:.4f} or more", started)
        return Recall(
            block=context_block(memories, note=note),
            memories=tuple(memories),
            reason=None,
            detail="",
            latency_ms=_elapsed_ms(started),
        )


def context_block(memories: list[RecalledMemory], *, note: str | None = None) -> str:
    """The framing (and `note`, one of SEARCHED_NOTES, when the search was degraded),
    then one numbered memory per item, a stale one saying what changed
    on a line of its own ("Stale: orders was renamed to order-service ..."). A memory's
    text is one line
    (newlines, control and bidi characters removed), so no stored text can end the
    frame, start an item of its own or reorder what the model reads. Each title, reason
    and summary is cut to its length (ending "[cut]"), and memories that would take the
    block past BLOCK_MAX_BYTES (UTF-8, the note included) are left out, the last line
    saying how many."""
    lines = [FRAMING] if note is None else [FRAMING, note]
    size = len("\n".join(lines).encode())
    for number, memory in enumerate(memories, start=1):
        summary = _quoted(memory.summary, BLOCK_SUMMARY_CHARS)
        seen = f"seen {memory.recurrences} times, " if memory.recurrences > 1 else ""
        sure = "" if memory.confidence is None else f"confidence {memory.confidence:.2f}: "
        title = _quoted(memory.title, BLOCK_TITLE_CHARS)
        stale = (
            f"\n   {_cut(one_line(memory.staleness), BLOCK_STALENESS_CHARS)}"
            if memory.staleness
            else ""
        )
        item = (
            # the confidence before the title, and every stored text quoted (the title, the
            # words matched on, the lesson): no stored text can show a hit line, a
            # confidence or "no precedent" of its own where the model reads the real ones
            # (a staleness note is the server's sentence, its names already quoted)
            f"{number}. {sure}{title} ({seen}"
            f"{_age(memory.age_days)}; matched on {_cut(one_line(memory.why), BLOCK_WHY_CHARS)})"
            f"\n   lesson: {summary}{stale}"
        )
        left = len(memories) - number + 1
        note = f"({left} more left out: the block is capped at {BLOCK_MAX_BYTES} bytes)"
        room = BLOCK_MAX_BYTES - (0 if left == 1 else len(note.encode()) + 1)
        if size + 1 + len(item.encode()) > room:
            lines.append(note)
            break
        lines.append(item)
        size += 1 + len(item.encode())
    return "\n".join(lines)


def _quoted(text: str, limit: int) -> str:
    """Stored text as data (`grandbo.text.rules.quoted`), cut at a word, marked "[cut]"."""
    return quoted(_cut(one_line(text), limit))


def _cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at a word where it can be, marked "[cut]"."""
    if len(text) <= limit:
        return text
    head = text[: limit - 6]
    return (head.rsplit(" ", 1)[0] if " " in head[limit // 2 :] else head) + " [cut]"


def _age(days: float) -> str:
    if days < 1:
        return "recorded today"
    if days > 3650:
        return "over 10 years ago"
    if days < 60:
        return f"{days:.0f} days ago"
    return f"{days / 30.4:.0f} months ago"


def _memory(hit: object) -> RecalledMemory | None:
    if not isinstance(hit, dict) or not isinstance(hit.get("why"), dict):
        return None
    why = hit["why"]
    try:
        score = float(why["fused_score"])
        age = float(hit["age_days"])
        title, summary, entry_id = hit["title"], hit["summary"], hit["entry_id"]
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    if not (math.isfinite(score) and math.isfinite(age) and age >= 0):
        return None
    if not all(isinstance(value, str) for value in (title, summary, entry_id)):
        return None
    recurrences = hit.get("recurrences", 1)
    if (
        isinstance(recurrences, bool)
        or not isinstance(recurrences, int)
        or not 1 <= recurrences <= MAX_RECURRENCES
    ):
        recurrences = 1  # a malformed count is not worth dropping the memory for
    stale = hit.get("staleness")
    note = stale.get("note") if isinstance(stale, dict) else None
    confidence = hit.get("confidence")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0.0 <= confidence <= 1.0  # NaN too
    ):
        confidence = None  # malformed or absent: shown without one, never dropped for it
    return RecalledMemory(
        str(entry_id),
        title,
        summary,
        age,
        score,
        _why(why),
        recurrences,
        # a malformed note is dropped, never the memory; a stale one is never unmarked
        note
        if isinstance(note, str)
        else ("Stale: the system has changed since." if stale else ""),
        None if confidence is None else float(confidence),
    )


def _why(why: dict[str, Any]) -> str:
    """Why a hit matched, in the hook's own words: the words it shares with the topic as
    they were written (`shared_words`; an older server's stems, `shared_tags`), quoted."""
    reasons = []
    shared = why.get("shared_words") or why.get("shared_tags")
    if isinstance(shared, list) and shared:
        words = [one_line(str(word))[:MAX_WORD_CHARS] for word in shared[:5]]
        reasons.append(
            "shared words " + ", ".join(json.dumps(w, ensure_ascii=False) for w in words)
        )
    if why.get("vector_rank") is not None:
        reasons.append(f"similar text (rank {why['vector_rank']})")
    return " and ".join(reasons) or "fused rank"


def _failure(error: BaseException, started: float) -> Recall:
    if isinstance(error, GrandboHTTPError):
        message = str(error.body.get("message", ""))[:200]
        if error.status == 401:
            return _empty("unauthorized", f"HTTP 401: {message}", started)
        if error.status == 403:
            return _empty(
                "forbidden",
                f"HTTP 403, refused at the API's edge (WAF or resource policy), not a token "
                f"problem: {message}",
                started,
            )
        if error.status >= 500:
            return _empty("server_error", f"HTTP {error.status}: {message}", started)
        return _empty("rejected", f"HTTP {error.status}: {message}", started)
    if isinstance(error, TimeoutError) or (
        isinstance(error, urllib.error.URLError) and isinstance(error.reason, TimeoutError)
    ):
        return _empty("timeout", f"no answer within the socket timeout: {error}", started)
    if isinstance(error, OSError):  # refused, reset, unresolvable (URLError is an OSError)
        return _empty("unreachable", f"{type(error).__name__}: {error}", started)
    # not JSON, not UTF-8, a broken status line or a truncated body
    return _empty("malformed_answer", f"{type(error).__name__}: {error}", started)


def _empty(reason: Reason, detail: str, started: float) -> Recall:
    return Recall("", (), reason, detail, _elapsed_ms(started))


def _elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
