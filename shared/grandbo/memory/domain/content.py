"""The minimum informative content of an entry: thin entries are refused at write time.

Why: a very short text embeds near the centroid of short texts in general, so it sits
close to almost any topic and takes vector-leg places from the entries that answer it
(the "tiny pages" of `shared/seeds/004_*`). Its few tags also make it a lexical
candidate for any topic sharing one. Measured with `bench.thin_entries` (docs/EVAL.md):
40 such entries in the 352-post-mortem lake sit under the vector cutoff for most
queries and cost hybrid MRR@10 0.006; nearer real entries fill the vector leg there,
and a small lake has fewer of them.

The rule, on the text that is embedded and tagged (title and summary):

1. the summary has at least MIN_SUMMARY_WORDS words (a word is a whitespace-separated
   run containing a letter or digit, as in the topic contract);
2. title and summary together yield at least MIN_INFORMATIVE_TAGS distinct informative
   tags (`grandbo.text.tags.tokenize`: stopwords, single characters and short numbers
   dropped, words stemmed), so a summary padded with stopwords or one word repeated does
   not pass.

Calibration: the thinnest of the 352 real post-mortems of the eval corpus has a
20-word summary and 15 distinct tags; none of them is refused, with a margin of 2.5x.
Explicit tags and the service are left out: they are not embedded as prose.
"""

from __future__ import annotations

import re
import unicodedata

from grandbo.text.tags import tokenize

MIN_SUMMARY_WORDS = 8
MIN_INFORMATIVE_TAGS = 6
# of them, the summary's own: a rich title over a summary of nothing is still thin
MIN_SUMMARY_TAGS = 3

_ALNUM = re.compile(r"[^\W_]")  # a letter or a digit (\w without the underscore)
# Han, kana, Hangul: scripts written without spaces between words
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

GUIDANCE = (
    "say what happened, the mechanism behind it and the affected component, e.g. "
    "'checkout-api p99 latency tripled because the 14:05 deploy halved the database "
    "connection pool; restoring the pool size fixed it'"
)


def _cjk_words(run: str) -> int:
    """Scripts written without spaces: a word is about two characters."""
    return len(_CJK.findall(run)) // 2


def summary_words(summary: str) -> int:
    """Words of `summary`: whitespace-separated runs with a letter or digit (invisible
    format characters such as zero-width spaces separate words too; a run of Chinese,
    Japanese or Korean counts a word per two characters). Single letters count: a summary
    of them is refused by its informative tags instead."""
    text = "".join(" " if unicodedata.category(ch) == "Cf" else ch for ch in summary)
    words = 0
    for run in text.split():
        if _CJK.search(run):
            words += max(1, _cjk_words(run))
        elif _ALNUM.search(run):
            words += 1
    return words


def informative_tags(title: str, summary: str) -> list[str]:
    """The distinct informative tags of an entry's title and summary, first-seen order."""
    return tokenize(f"{title}\n{summary}")


def _units(tags: list[str]) -> int:
    """Informative tags, a tag of a script without spaces counting as its words."""
    return sum(max(1, _cjk_words(tag)) for tag in tags)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def missing_content(title: str, summary: str) -> str | None:
    """What keeps the entry below the minimum of informative content, or None if nothing."""
    words = summary_words(summary)
    if words < MIN_SUMMARY_WORDS:
        return (
            f"is too short: {_plural(words, 'word')}, at least {MIN_SUMMARY_WORDS} are "
            f"needed so the entry is not close to every topic; {GUIDANCE}"
        )
    tags = informative_tags(title, summary)
    if _units(tags) < MIN_INFORMATIVE_TAGS:
        found = ", ".join(tags) or "none"
        return (
            f"carries too little information: title and summary give "
            f"{_plural(len(tags), 'distinct informative tag')} ({found}), at least "
            f"{MIN_INFORMATIVE_TAGS} are needed (stopwords and repeated words do not "
            f"count); {GUIDANCE}"
        )
    own = informative_tags("", summary)
    if _units(own) < MIN_SUMMARY_TAGS:
        return (
            f"says too little of its own: {_plural(len(own), 'informative tag')} "
            f"({', '.join(own) or 'none'}) beyond the title, at least {MIN_SUMMARY_TAGS} "
            f"are needed; {GUIDANCE}"
        )
    return None
