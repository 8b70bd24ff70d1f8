"""The questions a confidence fit makes from a lake, and its plain-Python fit (issue 50,
point 3): every question is a topic the query path accepts, the same entry always gives
the same questions and halves, and the fit the index job runs without numpy is the
offline numpy fit's."""

from __future__ import annotations

import random
import uuid

import pytest

from grandbo.memory.domain.lake_questions import SHAPES, half_of, left_out, questions_of
from grandbo.memory.domain.logistic import fit_plain
from grandbo.memory.domain.topic import validate_topic
from grandbo.memory.read.confidence.model import fit_logistic

TITLE = "Checkout Pool Exhausted By A Connection Leak"
SUMMARY = (
    "The checkout service leaked database connections on a retry path until the pool was "
    "exhausted and requests timed out waiting for a connection. Closing the cursor in a "
    "finally block fixed it."
)


def test_an_entry_gives_a_question_in_each_shape_the_topic_contract_accepts() -> None:
    entry_id = uuid.uuid4()
    questions = questions_of(entry_id, TITLE, SUMMARY)
    assert [q.shape for q in questions] == list(SHAPES)
    by_shape = {q.shape: q.text for q in questions}
    # a Title Case title is refused as a topic: asked in sentence case
    assert by_shape["title"] == "Checkout pool exhausted by a connection leak"
    # the summary's first sentence, at most 25 words
    assert by_shape["sentence"].startswith("The checkout service leaked database connections")
    assert len(by_shape["sentence"].split()) <= 25
    assert "Closing" not in by_shape["sentence"]
    # shortened: content words only
    assert by_shape["terse"] == "checkout service leaked database connections retry"
    for q in questions:
        assert validate_topic(q.text) == q.text
        assert q.source == entry_id
        assert q.left_out == left_out(entry_id)
        assert q.half == half_of(entry_id)


def test_what_cannot_be_a_topic_is_not_asked() -> None:
    # a two-word title and a summary with no sentence of four words give nothing
    assert questions_of(uuid.uuid4(), "Disk full", "Full. Again. Rotated.") == []
    # a summary whose first sentence is the title is asked once
    once = questions_of(
        uuid.uuid4(), "the cache grew without any bound", "The cache grew without any bound"
    )
    assert [q.shape for q in once][:1] == ["title"]
    assert "sentence" not in [q.shape for q in once]


def test_halves_and_left_out_entries_are_about_half_and_fixed_by_the_id() -> None:
    ids = [uuid.UUID(int=i * 7919) for i in range(1, 2001)]
    assert 0.45 < sum(left_out(i) for i in ids) / len(ids) < 0.55
    assert 0.45 < sum(half_of(i) == "fit" for i in ids) / len(ids) < 0.55
    assert [left_out(i) for i in ids] == [left_out(i) for i in ids]


@pytest.mark.parametrize("l2", [0.1, 1.0, 10.0])
def test_the_plain_fit_is_the_numpy_fit(l2: float) -> None:
    rng = random.Random(7)
    rows = [[rng.gauss(0, 1) for _ in range(6)] + [0.0] for _ in range(800)]
    labels = [int(2 * r[0] - r[3] + rng.gauss(0, 1) > 1.5) for r in rows]
    intercept, weights = fit_plain(rows, labels, l2=l2)
    names = [f"x{i}" for i in range(7)]
    expected_intercept, expected = fit_logistic(rows, labels, l2=l2, names=names)
    assert intercept == pytest.approx(expected_intercept, abs=1e-6)
    assert weights == pytest.approx([expected[n] for n in names], abs=1e-6)
    # a column that is always 0 (a signal a lake never shows) gets no weight
    assert weights[6] == 0.0
    assert weights[0] > 1.0
    assert weights[3] < -0.5
