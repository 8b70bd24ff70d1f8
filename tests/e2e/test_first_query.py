"""The first question of a fresh process (issue 43): `grandbo query` loads its model before
the topic's deadline starts, so a new user's first answer is a complete search; and when
the deadline is missed anyway, the keyword match is served, the answer says why, and the
process exits cleanly (it used to abort: "terminate called without an active exception",
exit 134, with the model's thread still running at exit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TOPIC = "an expired intermediate certificate broke TLS handshakes for older clients"
LESSON = "Expired intermediate certificate broke TLS for older clients"


def _grandbo(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "grandbo.cli", "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GRANDBO_EMBEDDING_PROVIDER": "local", **env},
        check=False,
    )


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("first-query")
    done = _grandbo(data_dir, "demo")
    assert done.returncode == 0, done.stderr
    return data_dir


def _answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "terminate called" not in done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_the_first_query_of_a_fresh_process_is_a_complete_search(seeded: Path) -> None:
    answer = _answer(_grandbo(seeded, "query", "--tenant", "demo", "--json", TOPIC))

    assert answer["metadata"]["searched"] == "complete"
    assert answer["metadata"]["vector_leg"] == "ok"
    assert answer["hits"][0]["title"] == LESSON


def test_a_missed_deadline_serves_the_keyword_match_says_why_and_exits_cleanly(
    seeded: Path,
) -> None:
    done = _grandbo(
        seeded,
        "query",
        "--tenant",
        "demo",
        "--json",
        TOPIC,
        GRANDBO_TOPIC_EMBED_TIMEOUT_S="0.000001",
    )

    answer = _answer(done)
    meta = answer["metadata"]
    assert meta["searched"] == "keywords_only"
    assert "Meaning search was unavailable" in meta["degraded"]
    assert not meta["no_precedent"]
    assert answer["hits"][0]["title"] == LESSON


def test_the_text_a_person_reads_says_what_could_not_be_searched(seeded: Path) -> None:
    done = _grandbo(
        seeded, "query", "--tenant", "demo", TOPIC, GRANDBO_TOPIC_EMBED_TIMEOUT_S="0.000001"
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert "Meaning search was unavailable" in done.stdout
    assert "keyword matches only" in done.stdout
    assert "Investigate it as new" not in done.stdout
    assert LESSON in done.stdout
