"""What of a redacted entry's text a logged question may quote, and the question without it
(issue 44: a redaction reaches the retrieval log).

Two kinds of quotation:

- a **telling token** of the text: one that carries a secret or an identifier rather than
  a word (a password, a key, an address, an e-mail, a host:port): it holds a digit, an
  `@` or an `=`, or runs to 24 characters or more. Removed from every logged question of
  the organization that holds it, whichever answer it got;
- a **run of QUOTED_WORDS words** of the text, in order (case and spacing aside): removed
  from the questions tied to the entry (an answer that served it, or asked under its
  incident), where a run of plain words is a quotation and not a coincidence.

Each quotation becomes REMOVED. Pure: the redaction's transaction reads and writes the rows
(`grandbo.memory.repository.redaction`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

REMOVED = "[redacted]"
QUOTED_WORDS = 4
TELLING_LENGTH = 24
_EDGES = "\"'`.,;:!?()[]{}<>"


def telling(token: str) -> bool:
    """Whether a token carries a secret or an identifier rather than a word."""
    return (
        any(c.isdigit() for c in token)
        or "@" in token
        or "=" in token
        or len(token) >= TELLING_LENGTH
    )


@dataclass(frozen=True, slots=True)
class Quotes:
    """What a logged question may quote of the removed texts."""

    tokens: frozenset[str]  # telling tokens, as written
    runs: frozenset[tuple[str, ...]]  # every run of QUOTED_WORDS words, lower-cased

    def __bool__(self) -> bool:
        return bool(self.tokens or self.runs)


def quotes_of(texts: Iterable[str]) -> Quotes:
    """The telling tokens and word runs of the texts (titles and summaries removed)."""
    tokens: set[str] = set()
    runs: set[tuple[str, ...]] = set()
    for text in texts:
        words = [w.strip(_EDGES) for w in text.split()]
        words = [w for w in words if w]
        tokens.update(w for w in words if telling(w) and len(w) >= 4)
        lowered = [w.lower() for w in words]
        runs.update(
            tuple(lowered[i : i + QUOTED_WORDS]) for i in range(len(lowered) - QUOTED_WORDS + 1)
        )
    return Quotes(frozenset(tokens), frozenset(runs))


def without_quotes(topic: str, quotes: Quotes, *, tied: bool) -> str:
    """`topic` with every telling token of `quotes` removed, and, where the question is
    tied to the entry (`tied`), every run of its words too."""
    scrubbed = topic
    for token in sorted(quotes.tokens, key=len, reverse=True):
        scrubbed = scrubbed.replace(token, REMOVED)
    if not tied or not quotes.runs:
        return scrubbed
    spans = list(re.finditer(r"\S+", scrubbed))
    words = [m.group().strip(_EDGES).lower() for m in spans]
    drop = [False] * len(spans)
    for i in range(len(words) - QUOTED_WORDS + 1):
        if tuple(words[i : i + QUOTED_WORDS]) in quotes.runs:
            for j in range(i, i + QUOTED_WORDS):
                drop[j] = True
    if not any(drop):
        return scrubbed
    pieces: list[str] = []
    last = 0
    i = 0
    while i < len(spans):
        if not drop[i]:
            i += 1
            continue
        start = spans[i].start()
        while i < len(spans) and drop[i]:
            i += 1
        pieces.append(scrubbed[last:start] + REMOVED)
        last = spans[i - 1].end()
    pieces.append(scrubbed[last:])
    return "".join(pieces)
