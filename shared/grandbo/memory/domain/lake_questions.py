"""Questions made from an organization's own lake, to fit its confidence model on (issue 50,
point 3: `grandbo.memory.lifecycle.confidence_fit`).

Each entry gives up to three questions in the shapes an investigator's agent sends: its
title as a sentence (`title`), one sentence of its summary cut to at most 25 words
(`sentence`), and that sentence shortened to its first content words (`terse`, 4-8
words). Every question honours the topic contract (`validate_topic`): one that would be
refused (too short, a title in Title Case kept as written) is not made. Deterministic:
the same entry always gives the same questions, and which entries are left out of memory
for "nothing close" and which questions are fit on depend on the entry's id alone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from uuid import UUID

from grandbo.errors import InvalidInputError
from grandbo.memory.domain.topic import validate_topic
from grandbo.text.stopwords import ENGLISH_STOPWORDS

SHAPES = ("title", "sentence", "terse")
SENTENCE_MAX_WORDS = 25
TERSE_WORDS = 6
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD_CHARS = re.compile(r"[\w]", re.UNICODE)


@dataclass(frozen=True, slots=True)
class LakeQuestion:
    """A question made from `source`'s text, in `shape`. `left_out`: the search is scored
    as if memory did not hold the source (the answer is "nothing close"); `half`: `fit`
    or `measure`."""

    source: UUID
    shape: str
    text: str
    left_out: bool
    half: str


def _bits(entry_id: UUID) -> bytes:
    return hashlib.sha256(b"lake-question:" + entry_id.bytes).digest()


def left_out(entry_id: UUID) -> bool:
    """Half of the entries, by hash, are left out of memory for their own questions."""
    return _bits(entry_id)[0] % 2 == 1


def half_of(entry_id: UUID) -> str:
    """`fit` or `measure`, by another bit of the same hash: an entry's questions are all
    in one half, so a model is measured on entries it was not fit on."""
    return "fit" if _bits(entry_id)[1] % 2 == 0 else "measure"


def _sentence_case(text: str) -> str:
    """A title as a person types it into a search box: lower case after its first word
    (a Title Case title is refused as a topic)."""
    words = text.split()
    return " ".join([words[0], *(w.lower() for w in words[1:])]) if words else text


def _first_sentence(summary: str) -> str:
    for sentence in _SENTENCE_END.split(summary.strip()):
        words = sentence.split()
        if len([w for w in words if _WORD_CHARS.search(w)]) >= 4:
            return " ".join(words[:SENTENCE_MAX_WORDS])
    return ""


def _terse(sentence: str) -> str:
    """The sentence's first content words (no stopwords, no punctuation at their ends)."""
    words = []
    for word in sentence.split():
        bare = word.strip(".,;:!?()[]\"'")
        if bare and _WORD_CHARS.search(bare) and bare.lower() not in ENGLISH_STOPWORDS:
            words.append(bare.lower())
        if len(words) == TERSE_WORDS:
            break
    return " ".join(words)


def questions_of(entry_id: UUID, title: str, summary: str) -> list[LakeQuestion]:
    """The entry's questions, one per shape that makes a valid topic, none repeated."""
    sentence = _first_sentence(summary)
    texts = {"title": _sentence_case(title), "sentence": sentence, "terse": _terse(sentence)}
    out: list[LakeQuestion] = []
    seen: set[str] = set()
    for shape in SHAPES:
        text = texts[shape]
        try:
            text = validate_topic(text)
        except InvalidInputError:
            continue
        if text.lower() in seen:
            continue
        seen.add(text.lower())
        out.append(LakeQuestion(entry_id, shape, text, left_out(entry_id), half_of(entry_id)))
    return out
