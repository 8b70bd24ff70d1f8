"""Idempotency keys: distinct writes never share a key, ordinary ids keep their old key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grandbo.errors import InvalidInputError
from grandbo.memory.domain.idempotency import (
    MAX_CALLER_KEY_CHARS,
    KeySpace,
    caller_key,
    idempotency_key,
    incident_finding_key,
)

_parts = st.lists(st.text(alphabet=st.sampled_from("ab:%3A_-"), max_size=6), max_size=4)


def test_the_reported_collision_is_gone() -> None:
    # incident `INC-9:finding:x` / finding `y` against incident `INC-9` / finding `x:finding:y`
    assert incident_finding_key("INC-9:finding:x", "y") != incident_finding_key(
        "INC-9", "x:finding:y"
    )


def test_ordinary_ids_keep_the_key_stored_before() -> None:
    assert incident_finding_key("INC-1042", "f1") == "incident:INC-1042:finding:f1"
    assert idempotency_key(KeySpace.EVAL, "doc-7") == "eval:doc-7"


@given(_parts, _parts)
def test_different_parts_never_share_a_key(a: list[str], b: list[str]) -> None:
    if a != b:
        assert idempotency_key(KeySpace.CLI, *a) != idempotency_key(KeySpace.CLI, *b)


@given(_parts, _parts)
def test_different_writers_never_share_a_key(a: list[str], b: list[str]) -> None:
    assert idempotency_key(KeySpace.CLI, *a) != idempotency_key(KeySpace.INCIDENT, *b)


def test_a_raw_key_cannot_take_another_writers_key() -> None:
    # a CLI user's key that spells an incident's key lands in the CLI's own space
    assert idempotency_key(KeySpace.CLI, "incident:INC-1:finding:f1") != incident_finding_key(
        "INC-1", "f1"
    )


@pytest.mark.parametrize(
    "value",
    ["", "k" * (MAX_CALLER_KEY_CHARS + 1), "has\x00nul", "lone \ud800 surrogate", "bell\x07"],
)
def test_a_caller_key_out_of_bounds_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        caller_key(value)
    assert raised.value.field == "Idempotency-Key"


def test_a_caller_key_in_bounds_is_kept() -> None:
    assert caller_key("k" * MAX_CALLER_KEY_CHARS) == "k" * MAX_CALLER_KEY_CHARS
