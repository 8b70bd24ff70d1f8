"""The command line's basics (issue 53, point 5): a version, the commands grouped by what
they are for, one rule for where the store is, and a command that only reads never makes
a store where there is none: it says which directory it looked in."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from grandbo.cli import COMMAND_GROUPS, READ_ONLY_COMMANDS, build_parser, main
from grandbo.commands.common import nearest_data_dir, settings_from


def _commands() -> set[str]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_every_command_is_in_one_group_of_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    grouped = [name for names in COMMAND_GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(_commands())  # each once, none left out
    with pytest.raises(SystemExit):
        main(["--help"])
    said = capsys.readouterr().out
    for group, names in COMMAND_GROUPS.items():
        assert f"  {group}:" in said
        for name in names:
            assert f"    {name} " in said
    # the groups come in their order; the dangerous ones last
    assert said.index("ask memory:") < said.index("write:") < said.index("dangerous")
    assert said.count("purge-organization") == 1


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out.startswith("grandbo ")


def test_the_nearest_store_up_the_tree_is_the_one_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "team" / "repo" / "src"
    deep.mkdir(parents=True)
    assert nearest_data_dir(deep) == deep / ".grandbo"  # none: where a first start makes one
    (tmp_path / "team" / ".grandbo" / "pgdata").mkdir(parents=True)
    (tmp_path / "team" / ".grandbo" / "pgdata" / "PG_VERSION").write_text("18\n")
    assert nearest_data_dir(deep) == tmp_path / "team" / ".grandbo"
    monkeypatch.chdir(deep)
    monkeypatch.delenv("GRANDBO_DATA_DIR", raising=False)
    assert settings_from(build_parser().parse_args(["query", "x"])).data_dir == (
        tmp_path / "team" / ".grandbo"
    )
    # the environment, then the flag, come first; either relative to where it is run
    monkeypatch.setenv("GRANDBO_DATA_DIR", "elsewhere")
    assert settings_from(build_parser().parse_args(["query", "x"])).data_dir == (deep / "elsewhere")
    flagged = build_parser().parse_args(["--data-dir", "mine", "query", "x"])
    assert settings_from(flagged).data_dir == deep / "mine"


@pytest.mark.parametrize("command", sorted(READ_ONLY_COMMANDS))
def test_a_read_only_command_makes_no_store_and_says_where_it_looked(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    for name in ("DATABASE_URL", "GRANDBO_ADMIN_DATABASE_URL", "GRANDBO_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    arguments = {
        "query": ["query", "disk full"],
        "retrievals": ["retrievals", "--tenant", "demo"],
        "export": ["export", "-o", str(tmp_path / "out.jsonl")],
        "audit": ["audit"],
        "calibrate": ["calibrate"],
    }[command]
    assert main(arguments) == 1
    said = capsys.readouterr().err
    assert f"no store in {tmp_path / '.grandbo'}" in said
    assert "--data-dir" in said
    assert list(tmp_path.iterdir()) == []
