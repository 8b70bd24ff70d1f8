"""The command line as a person meets it (issue 34, point 12): every flag says what it
does, every write command answers in JSON when asked, and a reader that goes away early
(`| head`) ends the command quietly."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

from grandbo.cli import build_parser

# the commands that write (memory, topology, a lake, settings): each takes --json
WRITE_COMMANDS = {
    "add",
    "correct",
    "retire",
    "redact",
    "embed-pending",
    "rebuild",
    "import",
    "audit",
    "calibrate",
}


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prefix} {name}".strip())


def test_every_flag_and_argument_says_what_it_is_for() -> None:
    missing = [
        (command, action.option_strings or [action.dest])
        for command, parser in _commands(build_parser(), "")
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not action.help
    ]
    assert missing == []


def test_every_write_command_answers_in_json_when_asked() -> None:
    commands = dict(_commands(build_parser(), ""))
    assert commands.keys() >= WRITE_COMMANDS
    lacking = [
        name
        for name in sorted(WRITE_COMMANDS)
        if "--json" not in {o for a in commands[name]._actions for o in a.option_strings}
    ]
    assert lacking == []


def test_a_reader_that_goes_away_early_ends_the_command_quietly() -> None:
    """Before: `grandbo ... | head` ended in a BrokenPipeError traceback."""
    command = [sys.executable, "-m", "grandbo.cli", "openapi"]
    with subprocess.Popen(  # noqa: S603 - our own CLI
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        head = process.stdout.read(20)  # what `head -c 20` reads, then it goes away
        process.stdout.close()
        errors = process.stderr.read()
        code = process.wait(timeout=60)
    assert head.startswith(b"{")
    assert errors == b""
    assert code == 0
