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
  zero-width or full-width characters, percent- or base64-encoded, look-alike letters of
  another script: `grandbo.text.spelling`) loses its whole topic;
- a string the person redacting **listed** (a short code, a plain-word passphrase), taken
  as a telling token whatever its length;
- in a question **tied** to the entry (an answer that served it, or asked under its
  incident): every word of the text that is not a common word (a name, a plain-word
  password), removed too: such a question is about what was redacted.

Each quotation becomes REMOVED. Pure: the redaction's transaction reads and writes the rows
(`grandbo.memory.repository.redaction`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from grandbo.errors import InvalidInputError
from grandbo.text.spelling import MIN_SPELLING, spelling, spellings
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
    """`text` as its variants spell it alike (`grandbo.text.spelling.spelling`: zero-width
    characters out, percent-decoded, NFKC, look-alike letters mapped, case folded, letters
    and digits only)."""
    return spelling(text)


@dataclass(frozen=True, slots=True)
class Quotes:
    """What a logged question may quote of the removed texts."""

    tokens: frozenset[str]  # telling tokens, as written
    words: frozenset[str]  # the texts' uncommon words, lower-cased (tied questions)
    # the tokens (and the strings the person redacting listed) as their variants spell
    # them alike (`compact`), made once for every row: what the log's spellings are
    # searched for, and whose digests check the questions filed after the redaction
    compact_tokens: frozenset[str]


def quotes_of(texts: Iterable[str], also: Iterable[str] = ()) -> Quotes:
    """The telling tokens and the uncommon words of the texts (titles, summaries, tags),
    and the strings the person redacting listed besides (`also`: a short code, a
    passphrase; each removed whatever its length, as a whole token, and in every
    spelling)."""
    listed = [a.strip() for a in also if a.strip()]
    tokens: set[str] = set(listed)
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
    spelt_alike = frozenset(
        {c for c in (compact(t) for t in tokens) if len(c) >= 6}
        | {c for c in (compact(a) for a in listed) if len(c) >= MIN_SPELLING}
    )
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
    left = spellings(scrubbed)
    if any(token in left for token in quotes.compact_tokens):
        return REMOVED
    return scrubbed


MAX_LISTED = 20
MAX_LISTED_CHARS = 500


def listed_strings(also: object) -> list[str]:
    """The strings a person redacting lists besides the text, checked: at most MAX_LISTED,
    each of at most MAX_LISTED_CHARS, spelling at least MIN_SPELLING letters or digits (a
    shorter one would remove every question holding those letters)."""
    if also is None:
        return []
    if not isinstance(also, list | tuple) or not all(isinstance(a, str) for a in also):
        raise InvalidInputError("also_remove", "must be a list of strings")
    if len(also) > MAX_LISTED:
        raise InvalidInputError("also_remove", f"at most {MAX_LISTED} strings")
    listed = []
    for given in also:
        text = given.strip()
        if len(text) > MAX_LISTED_CHARS:
            raise InvalidInputError("also_remove", f"each string at most {MAX_LISTED_CHARS} chars")
        if len(compact(text)) < MIN_SPELLING:
            raise InvalidInputError(
                "also_remove",
                f"{text!r} has fewer than {MIN_SPELLING} letters or digits: it would remove"
                " every question holding them; list a longer string",
            )
        listed.append(text)
    return listed
