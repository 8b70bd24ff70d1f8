"""The one tag tokenizer: entries are tagged and topics are matched with the same rules.

Tags are identifier-friendly: `checkout-api` is kept whole *and* split into `checkout` and
`api`, so an exact identifier matches exactly while its parts still match prose. Text is
NFKC-normalized and case-folded; English stopwords, single characters and very long runs
(hashes, base64) are dropped. Plain alphabetic words are reduced to their Snowball
(Porter 2) stem, so `timeouts` meets `timeout` and `exhausted` meets `exhaustion`;
identifiers, numbers and mixed tokens (`p99`, `us-east-1`, `checkout-api`) stay verbatim.
Measured on the cloud_postmortems symptom task (docs/EVAL.md): stemming raised the
lexical leg's recall@5 from 0.71 to 0.74 and MRR@10 from 0.57 to 0.58.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

import Stemmer

from grandbo.text.rules import one_line
from grandbo.text.stopwords import ENGLISH_STOPWORDS

MAX_TAG_CHARS = 64
MAX_TAGS_PER_TEXT = 512

# A token is a run of word characters joined by identifier punctuation (- _ . / :),
# e.g. `checkout-api`, `db.pool.max`, `us-east-1`, `k8s/ingress`.
_TOKEN = re.compile(r"\w+(?:[-_./:]\w+)*")
_PART_SEPARATORS = re.compile(r"[-_./:]+")
# PyStemmer: the Snowball C library (the same stems as the pure-Python snowballstemmer,
# checked on the 3,643 words of the eval corpus); 1 ms to import instead of 43 ms.
_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    if not word.isascii() or not word.isalpha():
        return word
    stem: str = _STEMMER.stemWord(word)
    return stem if len(stem) >= 2 else word


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _keep(tag: str) -> bool:
    if len(tag) < 2 or len(tag) > MAX_TAG_CHARS:
        return False
    if tag in ENGLISH_STOPWORDS:
        return False
    return not tag.isdigit() or len(tag) >= 3


def tokenize(text: str) -> list[str]:
    """Tags of `text` in first-seen order, without duplicates."""
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(_normalize(text)):
        token = match.group(0).strip("_")
        candidates = [token]
        parts = [p for p in _PART_SEPARATORS.split(token) if p]
        if len(parts) > 1:
            candidates.extend(parts)
        for candidate in candidates:
            if not _keep(candidate):
                continue
            tag = _stem(candidate)
            if tag not in seen:
                seen[tag] = None
                if len(seen) >= MAX_TAGS_PER_TEXT:
                    return list(seen)
    return list(seen)


def tags_for(texts: Iterable[str], explicit: Iterable[str] = ()) -> list[str]:
    """Tags of several texts plus explicit tags, each explicit tag tokenized the same way."""
    seen: dict[str, None] = {}
    for text in (*explicit, *texts):
        for tag in tokenize(text):
            seen.setdefault(tag, None)
    return list(seen)[:MAX_TAGS_PER_TEXT]


def tag_words(text: str) -> dict[str, str]:
    """Each tag of `text` and the word it was first read from (case-folded): a stem shown
    to a person in the words they wrote ("timeout" for `timeout`, "exhausted" for `exhaust`)."""
    words: dict[str, str] = {}
    for match in _TOKEN.finditer(_normalize(text)):
        token = match.group(0).strip("_")
        parts = [p for p in _PART_SEPARATORS.split(token) if p]
        for candidate in [token, *(parts if len(parts) > 1 else [])]:
            if _keep(candidate):
                words.setdefault(_stem(candidate), candidate)
    return words


def is_tag(value: str) -> bool:
    """Whether `value` could be a tag `tokenize` makes: one token, normalized and
    case-folded, 2 to MAX_TAG_CHARS characters (a stem may be a stopword's spelling)."""
    return (
        2 <= len(value) <= MAX_TAG_CHARS
        and _TOKEN.fullmatch(value) is not None
        and value.strip("_") == value
        and _normalize(value) == value
    )


def given_tags(title: str, summary: str, service: str | None, tags: Iterable[str]) -> list[str]:
    """Of an entry's index tags, those its own words do not give: what it was given beyond
    its text, as stems (the only record of them before migration 0041 kept tags as written;
    `spelled_back` finds their words where the lake still has them)."""
    words = set(tags_for([title, summary, service or ""]))
    given = [tag for tag in tags if tag not in words]
    # `team0-shard0` was indexed whole and as `team0`, `shard0`: one tag given, not three
    parts = {part for tag in given for part in _PART_SEPARATORS.split(tag) if part and part != tag}
    return [tag for tag in given if tag not in parts]


# zero-width and bidirectional characters: invisible in a tag, they would make two tags
# that read the same (`Redis` and `Re\u200ddis`)
_INVISIBLE = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def written_tags(tags: Iterable[str]) -> list[str]:
    """Tags as a person or an incident wrote them: each one line (line breaks, zero-width
    and bidirectional characters out, `grandbo.text.rules.one_line`), trimmed, the empty
    ones and repeats (the same tag in another case or form) left out, the first spelling
    kept."""
    seen: dict[str, str] = {}
    for tag in tags:
        kept = one_line(_INVISIBLE.sub("", tag))
        if kept:
            seen.setdefault(_normalize(kept), kept)
    return list(seen.values())


def spells_back(written: Sequence[str], stems: Sequence[str]) -> bool:
    """Whether `written` spells `stems` back, one word a stem in order, each the stem
    itself or a word it is the stem of (a spelling `spelled_back` gave from another lake's
    words, or before a redaction removed the word it came from)."""
    return len(written) == len(stems) and all(
        word == stem or _stem(_normalize(word)) == stem
        for word, stem in zip(written, stems, strict=True)
    )


def spelled_back(stems: Iterable[str], vocabulary: dict[str, str]) -> list[str]:
    """Stems shown in a word the lake wrote them from (`vocabulary`: stem -> word, as
    `tag_words` makes it), a stem no text holds as itself."""
    return written_tags(vocabulary.get(stem, stem) for stem in stems)
