"""A text as all its spellings read alike (issue 52: a redacted secret is found however a
question spells it).

`spelling(text)`: zero-width and soft-hyphen characters dropped, percent-decoded,
Unicode compatibility form (NFKC: full-width and mathematical letters become plain),
every look-alike letter of another script mapped to the Latin or digit it is confused
with (Unicode's confusables, TR39, as the `confusable-homoglyphs` package ships them:
Cyrillic `\u0430` reads `a`), case folded, and every character that is not a letter or a digit
left out (a hyphen or a space splitting a secret joins again). `spellings(text)` adds the
spelling of what its base64-looking tokens decode to: what the retrieval log's search
matches (`grandbo.memory.repository.log_scrub`) and what a question is checked against
on write.

`spelling_digest(salt, spelling)`: what a redaction keeps of a spelling it removed, the
SHA-256 of the organization's salt and the spelling's UTF-8, never the spelling itself
(migration 0040's grandbo_spells_redacted computes the same digest over every window of
a question's spellings).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import unicodedata
from collections.abc import Collection
from functools import lru_cache
from importlib import resources
from urllib.parse import unquote

# a spelling the person redacting asks to remove must be at least this long: a shorter
# one would remove every question holding any word with those letters
MIN_SPELLING = 4
# a base64 token this long or longer is tried as one (6 bytes of text)
_BASE64_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_INVISIBLE = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\u206a-\u206f\u3164\ufeff\uffa0]"
)
# what separates the spellings of one question's parts in `spellings` (never a letter or
# a digit, so no pattern matches across it)
SEPARATOR = " "


@lru_cache(maxsize=1)
def _look_alikes() -> dict[str, str]:
    """Every non-ASCII character Unicode lists as confusable with an ASCII letter or digit,
    mapped to it (loaded once, on the first spelling: ~9,600 characters)."""
    data = resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    table: dict[str, list[dict[str, str]]] = json.loads(data)
    mapped: dict[str, str] = {}
    for char, glyphs in table.items():
        if len(char) != 1 or char.isascii():
            continue
        for glyph in glyphs:
            target = glyph.get("c", "")
            if len(target) == 1 and target.isascii() and target.isalnum():
                mapped[char] = target
                break
    return mapped


def spelling(text: str) -> str:
    """`text` as its variants spell it alike (see the module)."""
    visible = _INVISIBLE.sub("", text)
    decoded = unquote(unquote(visible))  # twice: %2525 is a percent-encoded %25
    folded = unicodedata.normalize("NFKC", decoded)
    look_alikes = _look_alikes()
    mapped = "".join(look_alikes.get(c, c) for c in folded)
    return "".join(c for c in mapped.casefold() if c.isalnum())


def _decoded(token: str) -> str | None:
    """What a base64 (or base64url) token decodes to, if that is mostly printable text."""
    body = token.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    for alphabet in (None, b"-_"):
        try:
            raw = base64.b64decode(padded, altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        printable = sum(c.isprintable() for c in text)
        if text and printable >= 0.9 * len(text):
            return text
    return None


def spellings(*texts: str | None) -> str:
    """The spellings of `texts` (a question's topic, its incident id) and of what their
    base64-looking tokens decode to, each apart (SEPARATOR)."""
    parts: list[str] = []
    for text in texts:
        if not text:
            continue
        parts.append(spelling(text))
        for match in _BASE64_TOKEN.finditer(_INVISIBLE.sub("", text)):
            decoded = _decoded(match.group())
            if decoded is not None:
                parts.append(spelling(decoded))
    return SEPARATOR.join(p for p in parts if p)


def spelling_digest(salt: bytes, spelt: str) -> bytes:
    """The SHA-256 of the organization's salt and a spelling's UTF-8 (migration 0040)."""
    return hashlib.sha256(salt + spelt.encode("utf-8")).digest()


def spelt_digests(
    spelt: str, salt: bytes, digests: Collection[tuple[int, bytes]]
) -> set[tuple[int, bytes]]:
    """Which of the digests, each (length in characters, digest), some window of `spelt` (a
    question's `spellings`) has: what a question filed after a redaction is checked for,
    and what the audit re-verifies a receipt with."""
    wanted = set(digests)
    found: set[tuple[int, bytes]] = set()
    for length in {n for n, _ in wanted}:
        for start in range(len(spelt) - length + 1):
            key = (length, spelling_digest(salt, spelt[start : start + length]))
            if key in wanted:
                found.add(key)
    return found
