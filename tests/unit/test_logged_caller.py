"""A caller longer than the log's column (a person's long address) is logged as its digest,
never refused (a review of issue 51: its questions were dropped and counted as the writer
out of reach)."""

from __future__ import annotations

from grandbo.memory.domain.retrieval_log import MAX_CALLER_CHARS, logged_caller


def test_a_long_caller_is_logged_as_its_digest_and_a_short_one_as_itself() -> None:
    long = "person:" + "a" * 250 + "@example.com"
    digest = logged_caller(long)
    assert digest.startswith("sha256:")
    assert len(digest) <= MAX_CALLER_CHARS
    assert logged_caller(long) == digest  # one caller, one name
    assert logged_caller(long + "x") != digest
    assert logged_caller("acme-beacon") == "acme-beacon"
    at_bound = "k" * MAX_CALLER_CHARS
    assert logged_caller(at_bound) == at_bound
