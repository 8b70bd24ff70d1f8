"""The `grandbo` command line, against the test database through DATABASE_URL."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from grandbo.api.auth import SigningKey, keyring_document, new_secret
from grandbo.cli import main
from grandbo.storage.connections import DatabaseUrls

SUMMARY = "debug logging left on after a deploy filled the log volume within an hour"


@pytest.fixture
def cli_env(database: DatabaseUrls, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """An organization onboarded (a key of it in the local keyring) with no memory yet."""
    monkeypatch.setenv("DATABASE_URL", database.app)
    monkeypatch.setenv("GRANDBO_ADMIN_DATABASE_URL", database.admin)
    monkeypatch.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")
    monkeypatch.setenv("GRANDBO_DATA_DIR", str(tmp_path))
    tenant = f"cli-{uuid.uuid4().hex[:10]}"
    key = SigningKey(
        key_id=f"{tenant}-admin", tenant_id=tenant, secret=new_secret(), roles=["admin"]
    )
    (tmp_path / "keyring.json").write_text(keyring_document([key]))
    return tenant


def test_add_embed_query_correct_retire_rebuild(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = cli_env
    assert main(["migrate"]) == 0
    assert (
        main(
            [
                "add",
                "--tenant",
                tenant,
                "--title",
                "Redis evicted session keys",
                "--summary",
                "redis-sessions hit maxmemory and evicted session keys; users were logged out",
                "--service",
                "redis-sessions",
            ]
        )
        == 0
    )
    added = capsys.readouterr().out
    entry_id = re.search(r"recorded: ([0-9a-f-]{36})", added)
    assert entry_id is not None
    # the command embedded its own write (issue 34, point 11: a `grandbo serve` running
    # beside it never heard of it, and nothing said so): nothing is left to embed
    assert "embedded: searchable by meaning now" in added
    assert main(["embed-pending", "--tenant", tenant]) == 0
    assert "stored 0 embedding" in capsys.readouterr().out

    topic = "users are being logged out because redis-sessions evicts keys"
    assert main(["query", "--tenant", tenant, "--json", topic]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["hits"][0]["entry_id"] == entry_id.group(1)
    assert result["hits"][0]["why"]["lexical_rank"] == 1

    assert (
        main(
            [
                "correct",
                "--tenant",
                tenant,
                entry_id.group(1),
                "--title",
                "Redis evictions",
                "--summary",
                "allkeys-lru evicted session keys when a batch job filled redis-sessions",
                "--expected-revision",
                "1",
            ]
        )
        == 0
    )
    assert "revision 2" in capsys.readouterr().out
    assert main(["retire", "--tenant", tenant, entry_id.group(1), "--reason", "duplicate"]) == 0
    assert "[retired]" in capsys.readouterr().out
    assert main(["rebuild", "--tenant", tenant, "--verify"]) == 0
    assert "equals the replay of 3 events" in capsys.readouterr().out


def test_a_slug_topic_exits_2_with_the_reason(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", "--tenant", cli_env, "checkout-api-slow-queries"]) == 2
    assert "invalid topic" in capsys.readouterr().err


def test_a_stale_correction_exits_1_with_the_conflict(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["add", "--tenant", cli_env, "--title", "Some title", "--summary", SUMMARY])
    entry_id = re.search(r"recorded: ([0-9a-f-]{36})", capsys.readouterr().out)
    assert entry_id is not None
    code = main(
        [
            "correct",
            "--tenant",
            cli_env,
            entry_id.group(1),
            "--title",
            "New title",
            "--summary",
            "New summary text: " + SUMMARY,
            "--expected-revision",
            "7",
        ]
    )
    assert code == 1
    assert "is at revision 1, not 7" in capsys.readouterr().err


def test_demo_seeds_once_and_answers_meaningfully(
    cli_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import grandbo.commands.maintenance

    monkeypatch.setattr(grandbo.commands.maintenance, "DEMO_TENANT", cli_env)
    assert main(["demo"]) == 0
    first = capsys.readouterr().out
    assert "10 new entries, all embedded" in first
    assert "PgBouncer pool exhausted" in first  # the demo topic's obvious match
    assert main(["demo"]) == 0
    assert "0 new entries" in capsys.readouterr().out


ADD = ["--title", "Log volume filled", "--summary", SUMMARY]


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["add", *ADD, "--idempotency-key", "k" * 301], "idempotency_key"),
        (["add", *ADD, "--idempotency-key", "nul\x00"], "idempotency_key"),
        (["add", *ADD, "--actor", "a" * 201], "actor"),
        (["add", "--title", "Disk full", "--summary", "disk full again today"], "summary"),
        (["topology", "load", "/nonexistent/topology.json"], "file"),
    ],
)
def test_every_cli_error_is_one_line_and_a_nonzero_exit(
    cli_env: str, capsys: pytest.CaptureFixture[str], argv: list[str], field: str
) -> None:
    code = main([argv[0], "--tenant", cli_env, *argv[1:]])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert field in err


@pytest.mark.parametrize(
    "content",
    [
        "not json at all",
        '{"nodes": [{"node_type": "Service", "external_id": "a", "properties": {"k": "\\u0000"}}]}',
        '{"nodes": [{"node_type": "Service", "external_id": "a", "properties": {"k": NaN}}]}',
        "[1, 2, 3]",
    ],
)
def test_a_bad_topology_file_is_one_line_and_a_nonzero_exit(
    cli_env: str, capsys: pytest.CaptureFixture[str], tmp_path: Any, content: str
) -> None:
    path = tmp_path / "topology.json"
    path.write_text(content)
    code = main(["topology", "load", "--tenant", cli_env, str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert "Traceback" not in err


def test_one_cli_key_reused_for_another_command_or_entry_is_not_a_replay(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for name in ("A", "B"):
        assert main(["add", "--tenant", cli_env, *ADD, "--title", f"Lesson {name} here"]) == 0
        found = re.search(r"recorded: ([0-9a-f-]{36})", capsys.readouterr().out)
        assert found is not None
        ids.append(found.group(1))
    for entry_id in ids:
        argv = ["correct", "--tenant", cli_env, entry_id, "--idempotency-key", "K"]
        assert (
            main([*argv, "--title", "Corrected lesson", "--summary", "corrected: " + SUMMARY]) == 0
        )
        assert f"recorded: {entry_id}" in capsys.readouterr().out
    # and the same key on a retirement is a retirement, then a replay of it
    retire = ["retire", "--tenant", cli_env, ids[1], "--reason", "gone", "--idempotency-key", "K"]
    assert main(retire) == 0
    assert "recorded" in capsys.readouterr().out
    assert main(retire) == 0
    assert "unchanged" in capsys.readouterr().out


def test_redact_and_purge_organization_from_the_command_line(
    cli_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`grandbo redact` leaves a tombstone; `grandbo purge-organization` refuses unless
    --confirm repeats the organization, then deletes every row of it and says how many."""
    tenant = cli_env
    assert main(["migrate"]) == 0
    args = ["add", "--tenant", tenant, "--title", "Log volume filled", "--summary", SUMMARY]
    assert main(args) == 0
    found = re.search(r"recorded: ([0-9a-f-]{36})", capsys.readouterr().out)
    assert found is not None
    entry_id = found.group(1)
    redact = ["redact", "--tenant", tenant, entry_id, "--reason", "pasted token"]
    redact += ["--idempotency-key", "redact-once"]
    # not on a terminal, it asks for --yes rather than redacting (issue 34, point 12)
    assert main(redact) == 1
    assert "say --yes" in capsys.readouterr().err
    # on a terminal it asks; anything but yes redacts nothing
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda _: "n")
    assert main(redact) == 1
    assert "nothing redacted" in capsys.readouterr().err
    monkeypatch.setattr("builtins.input", lambda _: "y")
    assert main(redact) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"redacted: {entry_id}")
    assert "grandbo rewrite-redacted" in said  # the answer says the rewrite is pending
    assert main([*redact, "--yes", "--json"]) == 0  # a retry: the same tombstone
    redacted = json.loads(capsys.readouterr().out)
    assert redacted["tombstone"]["reason"] == "pasted token"
    assert redacted["rewrite_pending"] is True
    assert (
        main(
            [
                "add",
                "--tenant",
                tenant,
                "--title",
                "Log volume filled again",
                "--summary",
                SUMMARY + " again",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["purge-organization", "--tenant", tenant, "--confirm", "someone-else"]) == 2
    assert "must repeat the organization" in capsys.readouterr().err
    assert main(["purge-organization", "--tenant", tenant, "--confirm", tenant]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"]["org_memory_entries"] == 2
    assert main(["rebuild", "--tenant", tenant, "--verify"]) == 0
    assert "equals the replay of 0 events" in capsys.readouterr().out
