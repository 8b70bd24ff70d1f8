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

from grandbo.text.tags import tokenize

MIN_SUMMARY_WORDS = 8
MIN_INFORMATIVE_TAGS = 6

_WORD = re.compile(r"\w")

GUIDANCE = (
    "say what happened, the mechanism behind it and the affected component, e.g. "
    "'checkout-api p99 latency tripled because the 14:05 deploy halved the database "
    "connection pool; restoring the pool size fixed it'"
)


def summary_words(summary: str) -> int:
    """Words of `summary`: whitespace-separated runs containing a letter or digit."""
    return sum(1 for word in summary.split() if _WORD.search(word))


def informative_tags(title: str, summary: str) -> list[str]:
    """The distinct informative tags of an entry's title and summary, first-seen order."""
    return tokenize(f"{title}\n{summary}")


def missing_content(title: str, summary: str) -> str | None:
    """What keeps the entry below the minimum of informative content, or None if nothing."""
    words = summary_words(summary)
    if words < MIN_SUMMARY_WORDS:
        return (
            f"is too short: {words} words, at least {MIN_SUMMARY_WORDS} are needed so the "
            f"entry is not close to every topic; {GUIDANCE}"
        )
    tags = informative_tags(title, summary)
    if len(tags) < MIN_INFORMATIVE_TAGS:
        found = ", ".join(tags) or "none"
        return (
            f"carries too little information: title and summary give {len(tags)} distinct "
            f"informative tags ({found}), at least {MIN_INFORMATIVE_TAGS} are needed "
            f"(stopwords and repeated words do not count); {GUIDANCE}"
        )
    return None
