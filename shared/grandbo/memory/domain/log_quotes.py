"""What of a redacted entry's text a logged question may quote, and the question without it
(issue 44: a redaction reaches the retrieval log).

Two kinds of quotation:

- a **telling token** of the text: a secret or an identifier rather than a word (a
  password, a key, an address, an e-mail, a host:port), taken whole and in the parts an
  assignment, a URL or an address is made of (`DB_PASSWORD=s3cretVALUE9` gives
  `s3cretVALUE9`; `postgres://admin:Pa55wordQ@db.internal:5432/app` gives `Pa55wordQ`): one
  of TELLING_LENGTH characters or more, or of MIXED_LENGTH or more mixing letters and
  digits, or an e-mail. Removed, case aside and as a whole token, from every logged
  question of the organization; a question holding one spelt otherwise (other hyphens,
  zero-width or full-width characters, percent-encoded) loses its whole topic;
- in a question **tied** to the entry (an answer that served it, or asked under its
  incident): every word of the text that is not a common word (a name, a plain-word
  password), removed too: such a question is about what was redacted.

Each quotation becomes REMOVED. Pure: the redaction's transaction reads and writes the rows
(`grandbo.memory.repository.redaction`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from grandbo.text.stopwords import ENGLISH_STOPWORDS

REMOVED = "[redacted]"
TELLING_LENGTH = 24
MIXED_LENGTH = 8
# what a secret is joined to its name or its neighbours with, in an assignment or a URL:
# first apart from a host:port (kept together), then from each other
_PARTS = re.compile(r"[=/@?&#,;()\[\]{}<>\"'`|\\]+")
_COLONS = re.compile(r":+")
_EDGES = "\"'`.,;:!?()[]{}<>"
_WORDS = re.compile(r"[^\W_]{3,}")
_INVISIBLE = re.compile(r"[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]")


def telling(token: str) -> bool:
    """Whether a token carries a secret or an identifier rather than a word."""
    if len(token) >= TELLING_LENGTH:
        return True
    if "@" in token.strip("@") and len(token) >= 6:  # an e-mail address
        return True
    letters = any(c.isalpha() for c in token)
    digits = any(c.isdigit() for c in token)
    return letters and digits and len(token) >= MIXED_LENGTH


def compact(text: str) -> str:
    """`text` as its variants spell it alike: percent-decoded, NFKC (full-width to plain),
    case folded, with every character that is not a letter or a digit left out."""
    folded = unicodedata.normalize("NFKC", unquote(_INVISIBLE.sub("", text))).casefold()
    return "".join(c for c in folded if c.isalnum())


@dataclass(frozen=True, slots=True)
class Quotes:
    """What a logged question may quote of the removed texts."""

    tokens: frozenset[str]  # telling tokens, as written
    words: frozenset[str]  # the texts' uncommon words, lower-cased (tied questions)
    # the tokens as their variants spell them alike (`compact`), made once for every row
    compact_tokens: frozenset[str]


def quotes_of(texts: Iterable[str]) -> Quotes:
    """The telling tokens and the uncommon words of the texts (titles, summaries, tags)."""
    tokens: set[str] = set()
    words: set[str] = set()
    for text in texts:
        for whole in text.split():
            whole = whole.strip(_EDGES)
            parts = _PARTS.split(whole)
            pieces = [p for part in parts for p in _COLONS.split(part)]
            for candidate in (c.strip(_EDGES) for c in [whole, *parts, *pieces]):
                if candidate and telling(candidate):
                    tokens.add(candidate)
        words.update(
            w
            for w in (m.group().lower() for m in _WORDS.finditer(text))
            if w not in ENGLISH_STOPWORDS
        )
    spelt_alike = frozenset(c for c in (compact(t) for t in tokens) if len(c) >= 6)
    return Quotes(frozenset(tokens), frozenset(words), spelt_alike)


def _bounded(token: str) -> str:
    """A pattern of `token` as a whole token (no letter or digit touching either end)."""
    return rf"(?<![^\W_]){re.escape(token)}(?![^\W_])"


def without_quotes(topic: str, quotes: Quotes, *, tied: bool) -> str:
    """`topic` without what it quotes of the removed texts: every telling token, and in a
    question tied to the entry every uncommon word of them too; a topic holding a telling
    token spelt otherwise is removed whole."""
    scrubbed = topic
    for token in sorted(quotes.tokens, key=len, reverse=True):
        scrubbed = re.sub(_bounded(token), REMOVED, scrubbed, flags=re.IGNORECASE)
    if tied and quotes.words:
        scrubbed = re.sub(
            r"[^\W_]{3,}",
            lambda m: REMOVED if m.group().lower() in quotes.words else m.group(),
            scrubbed,
        )
    left = compact(scrubbed)
    if any(token in left for token in quotes.compact_tokens):
        return REMOVED
    return scrubbed
