"""The `grandbo` command line, against the test database through DATABASE_URL."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from grandbo.cli import main
from grandbo.storage.connections import DatabaseUrls


@pytest.fixture
def cli_env(database: DatabaseUrls, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", database.app)
    monkeypatch.setenv("GRANDBO_ADMIN_DATABASE_URL", database.admin)
    monkeypatch.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")
    return f"cli-{uuid.uuid4().hex[:10]}"


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
    entry_id = re.search(r"recorded: ([0-9a-f-]{36})", capsys.readouterr().out)
    assert entry_id is not None
    assert main(["embed-pending", "--tenant", tenant]) == 0
    assert "stored 1 embedding" in capsys.readouterr().out

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
                "allkeys-lru evicted session keys",
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
    main(["add", "--tenant", cli_env, "--title", "Some title", "--summary", "Some summary text"])
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
            "New summary text",
            "--expected-revision",
            "7",
        ]
    )
    assert code == 1
    assert "is at revision 1, not 7" in capsys.readouterr().err


def test_demo_seeds_once_and_answers_meaningfully(
    cli_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import grandbo.cli

    monkeypatch.setattr(grandbo.cli, "DEMO_TENANT", cli_env)
    assert main(["demo"]) == 0
    first = capsys.readouterr().out
    assert "10 new entries, 10 embedded" in first
    assert "PgBouncer pool exhausted" in first  # the demo topic's obvious match
    assert main(["demo"]) == 0
    assert "0 new entries" in capsys.readouterr().out
