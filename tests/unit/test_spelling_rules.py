"""The spelling rules' second round (after issue 52's break-it review): what changed for
the spellings a question is kept and checked with, and what must not have.

The variants a redaction must reach (look-alike capitals, combining marks, glued, nested,
hex, UTF-16, full-width base64) are tried end to end against a real redaction in
tests/integration/test_break_redaction_spellings.py; here, the rules' own promises."""

from __future__ import annotations

import base64
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from grandbo.text.spelling import (
    SEPARATOR,
    _first_rules,
    spelling,
    spelling_digest,
    spellings,
    spelt_digests,
)

SALT = b"s" * 32


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable.replace("%", ""), max_size=200))
def test_an_ascii_text_spells_as_the_first_rules_spelled_it(text: str) -> None:
    # the digests a redaction kept before this round are of ASCII secrets' first spellings
    assert spelling(text) == _first_rules(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_every_text_keeps_its_first_rules_spelling_among_its_spellings(text: str) -> None:
    first = _first_rules(text)
    if first:
        assert first in spellings(text).split(SEPARATOR)


def test_a_secret_redacted_under_the_first_rules_is_still_found_on_write() -> None:
    secret = "crème-brûlée-7Q2x9Zk"  # accents: the second round drops combining marks
    kept = {(len(_first_rules(secret)), spelling_digest(SALT, _first_rules(secret)))}
    assert spelling(secret) != _first_rules(secret)
    assert spelt_digests(spellings(f"who pasted {secret} here"), SALT, kept) == kept


def test_capitals_that_read_i_read_i_and_marks_are_dropped() -> None:
    assert spelling("Zq7v\u0399c2") == spelling("Zq7v\u0406c2") == spelling("Zq7vIc2") == "zq7vic2"
    assert spelling("\u03f2a\u0301t") == "cat"  # lunate sigma, an acute accent


def test_an_unrelated_identifier_decodes_to_nothing() -> None:
    # a commit hash, a UUID and words glued by hyphens are not encodings of text
    question = (
        "deploy 5eac0f6a1b2c3d4e5f60718293a4b5c6d7e8f901 of service-discovery-timeout"
        " broke 3f2b8c1e-9d4a-4b6e-8f0a-1c2d3e4f5a6b"
    )
    assert spellings(question) == spelling(question)


def test_nested_and_glued_encodings_are_decoded() -> None:
    inner = base64.b64encode(b"the secret is hunter2hunter2").decode()
    outer = base64.b64encode(inner.encode()).decode()
    assert "thesecretishunter2hunter2" in spellings(f"env TOKEN_B64_{outer} leaked")
    hexed = b"the secret is hunter2hunter2".hex()
    assert "thesecretishunter2hunter2" in spellings(f"/v1/blob/{hexed}")


def test_a_hostile_text_spells_within_a_bound_and_decoys_hide_nothing() -> None:
    # base64 of base64 of ..., a token of 500 glued encodings, 80 decoys before the secret
    text = "x"
    for _ in range(6):
        text = base64.b64encode(text.encode() * 3).decode()
    glued = "-".join(base64.b64encode(f"lesson {i:04d}".encode()).decode() for i in range(500))
    hostile = f"{text} {glued}"[:8000]
    assert len(spellings(hostile)) <= 4 * len(hostile)  # no overlapping decodings
    decoys = " ".join(base64.b64encode(f"plain word {i}".encode()).decode() for i in range(80))
    secret = base64.b64encode(b"hunter2hunter2").decode()
    assert "hunter2hunter2" in spellings(f"{decoys} {secret}")
    assert "hunter2hunter2" in spellings("X-" * 40 + secret)  # glues nearest the end


def test_a_short_decoding_comes_before_a_long_one() -> None:
    # the check on write reads the first 8,000 characters of a question's spellings
    blob = base64.b64encode(base64.b64encode(base64.b64encode(b"filler " * 300))).decode()
    secret = base64.b64encode(b"hunter2hunter2").decode()
    spelt = spellings(f"decode {blob} and then {secret} please")
    assert spelt.index("hunter2hunter2") < 8000 < len(spelt)
