"""A text as all its spellings read alike (issue 52: a redacted secret is found however a
question spells it).

`spelling(text)`: zero-width and soft-hyphen characters dropped, percent-decoded (and the
invisible characters it spelled dropped), every look-alike letter of another script
mapped to the Latin or digit it is confused with (Unicode's confusables, TR39, as the
`confusable-homoglyphs` package ships them: Cyrillic `\u0430` reads `a`; a capital that
reads `l` but whose small letter reads `i`, Greek `\u0399` or Cyrillic `\u0406`, reads
`i`), before the Unicode compatibility form and again after it (NFKC: full-width and
mathematical letters become plain, but a lunate sigma that reads `c` would become a
sigma), combining marks dropped (`c\u0301` reads `c`), case folded, and every character
that is not a letter or a digit left out (a hyphen or a space splitting a secret joins
again). An ASCII text spells as the first rules (issue 52's) spelled it.

`spellings(text)` adds the spelling of what its encoded tokens decode to: base64 and
base64url (whole, or after or before a `/`, `_` or `-` glued to them: a URL's path, an
environment variable's name; wrapped over lines), hex (with its `0x`), found in the text
as written, percent-decoded and in its compatibility form (full-width), UTF-8 or UTF-16
text of either byte order (PowerShell's `-enc`), up to three encodings deep (base64 of
base64), a token decoding to no more than its own length; and the spelling by the first
rules of a text they spell otherwise, so what a redaction before these rules kept still
matches. The text's own spelling first, the rest shortest first. It is what the
retrieval log's search matches (`grandbo.memory.repository.log_scrub`) and what a
question is checked against on write.

`spelling_digest(salt, spelling)`: what a redaction keeps of a spelling it removed, the
SHA-256 of the organization's salt and the spelling's UTF-8, never the spelling itself
(migration 0040's grandbo_spells_redacted computes the same digest over every window of
a question's spellings).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import itertools
import json
import re
import unicodedata
from collections.abc import Collection
from functools import lru_cache
from importlib import resources
from urllib.parse import unquote

# the round of these rules (migration 0042 records it beside each kept spelling: a
# question kept by an earlier round is re-spelled by the audit's repair)
SPELLING_RULES = 2
# a spelling the person redacting asks to remove must be at least this long: a shorter
# one would remove every question holding any word with those letters
MIN_SPELLING = 4
# a base64 or hex token this long or longer is tried as one (6 bytes of base64, 4 of hex)
MIN_TOKEN = 8
_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX_TOKEN = re.compile(r"[0-9A-Fa-f]+")
_GLUE = re.compile(r"[/_-]")
# a line of base64 wrapped over lines (PEM wraps at 64, `base64` at 76)
_WRAPPED_LINE = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_HEX_MARK = re.compile(r"0x(?=[0-9A-Fa-f]{2})|\\x(?=[0-9A-Fa-f]{2})")
# how many glues nearest each end of a token are tried (a token of a thousand hyphens
# tries 64), how many encodings deep, and how many characters of decoded text a text
# gives at most (beyond what an 8,000-character question can decode to without overlap:
# a safety bound, not a limit an attacker can spend)
MAX_GLUES = 32
MAX_DEPTH = 3
MAX_DECODED_CHARS = 64_000
_INVISIBLE = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\u206a-\u206f\u3164\ufeff\uffa0]"
)
# what separates the spellings of one question's parts in `spellings` (never a letter or
# a digit, so no pattern matches across it)
SEPARATOR = " "


@lru_cache(maxsize=1)
def _confusables() -> dict[str, str]:
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


@lru_cache(maxsize=1)
def _look_alikes() -> dict[str, str]:
    """The confusables, where a capital whose look-alike is `l` while its small letter's
    is `i` (Greek iota, Cyrillic dotted i: the shapes of a capital I) reads `i`, as the
    capital I it stands for is case folded."""
    table = _confusables()
    return {
        char: "i" if target == "l" and table.get(char.lower()) == "i" else target
        for char, target in table.items()
    }


def _first_rules(text: str) -> str:
    """`text` spelled by issue 52's first rules: what a redaction before the current
    rules kept the digests of."""
    decoded = unquote(unquote(_INVISIBLE.sub("", text)))
    folded = unicodedata.normalize("NFKC", decoded)
    table = _confusables()
    return "".join(c for c in "".join(table.get(c, c) for c in folded).casefold() if c.isalnum())


def spelling(text: str) -> str:
    """`text` as its variants spell it alike (see the module)."""
    # twice: %2525 is a percent-encoded %25; what it spelled may be invisible too
    decoded = _INVISIBLE.sub("", unquote(unquote(_INVISIBLE.sub("", text))))
    if decoded.isascii():  # as the first rules spelled it
        return "".join(c for c in decoded.casefold() if c.isalnum())
    table = _look_alikes()
    mapped = "".join(table.get(c, c) for c in decoded)  # before NFKC turns a lunate sigma
    folded = "".join(table.get(c, c) for c in unicodedata.normalize("NFKC", mapped))
    bare = "".join(c for c in unicodedata.normalize("NFD", folded) if not unicodedata.combining(c))
    return "".join(c for c in bare.casefold() if c.isalnum())


def _printable_share(text: str) -> float:
    return sum(c.isprintable() for c in text) / len(text) if text else 0.0


def _text_of(raw: bytes) -> str | None:
    """`raw` as text, UTF-8 or UTF-16 of either byte order (PowerShell's `-enc`), if that
    is mostly printable; of the two UTF-16 readings, the one with more ASCII (text read in
    the wrong order comes out as CJK letters, printable too)."""
    readings: list[str] = []
    if len(raw) % 2 == 0 and raw.count(0) * 4 >= len(raw):  # every other byte a NUL
        for encoding in ("utf-16-le", "utf-16-be"):
            try:
                readings.append(raw.decode(encoding))
            except UnicodeDecodeError:
                continue
        readings.sort(key=lambda text: -sum(c.isascii() for c in text))
    with contextlib.suppress(UnicodeDecodeError):
        readings.append(raw.decode("utf-8"))
    return next((text for text in readings if _printable_share(text) >= 0.9), None)


def _decoded(token: str) -> str | None:
    """What a base64 (or base64url) or hex token decodes to, if that is mostly printable
    text."""
    if len(token) % 2 == 0 and _HEX_TOKEN.fullmatch(token):
        hexed = _text_of(bytes.fromhex(token))
        if hexed is not None:
            return hexed
    body = token.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    for alphabet in (None, b"-_"):
        try:
            raw = base64.b64decode(padded, altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue
        text = _text_of(raw)
        if text is not None:
            return text
    return None


def _token_decodings(token: str) -> list[str]:
    """What a token decodes to: whole; else its parts glued by a `/`, `_` or `-` (a URL's
    path before a base64 token, an environment variable's name, a suffix), what follows a
    glue, what precedes it, each piece between two, of the MAX_GLUES glues nearest each
    end, the longest first, none overlapping one decoded already (so a token decodes to
    at most its own length, however it is glued)."""
    whole = _decoded(token)
    if whole is not None:
        return [whole]
    glues = [m.start() for m in _GLUE.finditer(token)]
    if len(glues) > 2 * MAX_GLUES:
        glues = glues[:MAX_GLUES] + glues[-MAX_GLUES:]
    bounds = [-1, *glues, len(token)]
    spans = {(at + 1, len(token)) for at in glues} | {(0, at) for at in glues}
    spans |= {(a + 1, b) for a, b in itertools.pairwise(bounds)}
    taken: list[tuple[int, int, str]] = []
    for start, end in sorted(spans, key=lambda span: (span[0] - span[1], span[0])):
        if end - start < MIN_TOKEN or any(start < e and s < end for s, e, _ in taken):
            continue
        decoded = _decoded(token[start:end])
        if decoded is not None:
            taken.append((start, end, decoded))
    return [decoded for _, _, decoded in sorted(taken)]


def _forms(visible: str) -> set[str]:
    """The forms of a text its encoded tokens are looked for in: as written,
    percent-decoded, in the compatibility form (full-width), base64 wrapped over lines
    joined (PEM, a kubeconfig), hex without its `0x` or `\\x` marks."""
    forms = {visible, unquote(unquote(visible)), unicodedata.normalize("NFKC", visible)}
    if "\n" in visible:
        forms.add(_unwrapped(visible))
    if _HEX_MARK.search(visible):
        forms.add(_HEX_MARK.sub("", visible))
    return forms


def _unwrapped(text: str) -> str:
    """`text` with the lines of a wrapped base64 blob (each line nothing but base64)
    joined into one."""
    groups = itertools.groupby(
        text.splitlines(), key=lambda line: _WRAPPED_LINE.fullmatch(line.strip()) is not None
    )
    return "\n".join(
        "".join(line.strip() for line in lines) if wrapped else "\n".join(lines)
        for wrapped, lines in groups
    )


def _decodings(text: str, depth: int, out: list[str], budget: list[int]) -> None:
    """What the encoded tokens of `text` (in each of its `_forms`) decode to, and theirs,
    `depth` levels deep, appended to `out` while `budget` (characters) lasts."""
    if depth == 0:
        return
    seen: set[str] = set()
    for form in _forms(_INVISIBLE.sub("", text)):
        for match in _TOKEN.finditer(form):
            token = match.group()
            if token in seen:
                continue
            seen.add(token)
            for decoded in _token_decodings(token):
                if budget[0] < len(decoded):
                    return
                budget[0] -= len(decoded)
                out.append(decoded)
                _decodings(decoded, depth - 1, out, budget)


def spellings(*texts: str | None) -> str:
    """The spellings of `texts` (a question's topic, its incident id) and of what their
    encoded tokens decode to, each apart (SEPARATOR); the first rules' spelling too, where
    it differs. Each text's own spelling first, then the others shortest first: the check
    on write reads the first 8,000 characters (migration 0040), and a short decoding (a
    pasted secret's) comes before long ones (a blob's)."""
    own: list[str] = []
    others: list[str] = []
    for text in texts:
        if not text:
            continue
        decoded: list[str] = []
        _decodings(text, MAX_DEPTH, decoded, [MAX_DECODED_CHARS])
        own.append(spelling(text))
        others += [spelling(each) for each in decoded]
        others += [_first_rules(each) for each in (text, *decoded) if _spelt_otherwise(each)]
    ordered = [*own, *sorted(others, key=len)]
    return SEPARATOR.join(dict.fromkeys(p for p in ordered if p))


def _spelt_otherwise(text: str) -> bool:
    """Whether the first rules may spell `text` otherwise than these (non-ASCII, or
    percent-encoded)."""
    return not text.isascii() or "%" in text


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
