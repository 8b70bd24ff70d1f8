"""The console's floor field: a plain decimal from 0 to 1, anything else a 400 page (the
break-it pass sent '' and '.', which reached float() and a 500)."""

from __future__ import annotations

import pytest

from grandbo.console.forms import ConsoleError, probability


@pytest.mark.parametrize("text", ["0", "0.05", ".5", "1.", "1", "0.0147", " 0.3 "])
def test_a_decimal_from_0_to_1_is_taken(text: str) -> None:
    assert probability(text) == float(text)


@pytest.mark.parametrize(
    "text",
    ["", ".", None, "1e-2", "NaN", "inf", "-0.1", "1.01", "0x1", "\u0660.\u0665", "0,5", "10"],
)
def test_anything_else_is_a_400_naming_the_field(text: object) -> None:
    with pytest.raises(ConsoleError) as refused:
        probability(text)
    assert refused.value.status == 400
    assert refused.value.field == "min_confidence"
