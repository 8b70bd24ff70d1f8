"""Every field a log line adds is one logging accepts: a key that names a LogRecord
attribute (`created`, `message`, `module`, ...) makes `Logger.makeRecord` raise KeyError
("Attempt to overwrite 'created' in LogRecord"), so the line's handler fails after its
work is done. The deployed functions log at INFO (infra/functions.py) and the tests at
WARNING, so an INFO line is never run by the suite: this reads every logging call in the
functions and the shared package instead."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}
# what Logger.makeRecord refuses in `extra`, and the names a formatter sets
RESERVED = set(logging.LogRecord("n", logging.INFO, "p", 1, "m", None, None).__dict__) | {
    "message",
    "asctime",
}
OWN_KEYWORDS = {"exc_info", "stack_info", "stacklevel", "extra"}


def _logged_fields() -> list[tuple[str, int, str]]:
    found = []
    for folder in ("functions", "shared/grandbo"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LEVELS
                    and "log" in ast.unparse(node.func.value).lower()
                ):
                    continue
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                for keyword in node.keywords:
                    if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                        for key in keyword.value.keys:
                            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                                found.append((where, node.lineno, key.value))
                    elif keyword.arg is not None and keyword.arg not in OWN_KEYWORDS:
                        found.append((where, node.lineno, keyword.arg))  # powertools' kwargs
    return found


def test_the_reading_finds_the_logging_calls() -> None:
    fields = {field for _, _, field in _logged_fields()}
    assert {"corroborated", "entries_created", "reason"} <= fields


def test_no_log_line_names_a_log_record_attribute() -> None:
    clashing = [(where, field) for where, _, field in _logged_fields() if field in RESERVED]
    assert clashing == []


def test_a_clashing_field_is_what_logging_refuses() -> None:
    log = logging.getLogger("grandbo.test")
    with pytest.raises(KeyError, match="created"):
        log.makeRecord("n", logging.INFO, "p", 1, "m", None, None, extra={"created": 5})
