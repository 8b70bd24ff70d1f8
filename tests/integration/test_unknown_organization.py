"""Issue 44, point 3: every command that takes `--tenant` refuses an organization that does
not exist, in one line naming those that do, and stores nothing; `--create-tenant` makes
one where making one makes sense (`people add`, `add`, `import`).

On a store of its own (an embedded PostgreSQL in a temporary data directory) whose only
organization is the demo one, `demo`, as a new user's is after `grandbo demo`."""

from __future__ import annotations

import argparse
import json
import signal
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from grandbo.api.keyring_file import keyring_organizations
from grandbo.cli import build_parser, main
from grandbo.local.organizations import store_organizations
from grandbo.local.runner import local_keyring
from grandbo.local.settings import Settings
from grandbo.memory.repository.purge import OrganizationPurge
from grandbo.storage.connections import connect
from tests.unit.test_cli_surface import _commands as every_command

TYPO = "demo-org"
ENTRY = "00000000-0000-4000-8000-000000000001"
EMAIL = "ann@example.com"
TOPIC = "checkout requests time out waiting for a database connection after a deploy"


@dataclass(frozen=True)
class Store:
    data_dir: Path
    lake: Path  # the demo organization's lake, exported: what an import reads

    @property
    def settings(self) -> Settings:
        return Settings(data_dir=self.data_dir, provider="fake")

    @property
    def keyring(self) -> Path:
        return self.data_dir / "keyring.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    from grandbo.local.postgres import stop_embedded_postgres

    data_dir = tmp_path_factory.mktemp("organizations")
    lake = data_dir / "demo.jsonl"
    with pytest.MonkeyPatch.context() as env:
        for name in ("DATABASE_URL", "GRANDBO_ADMIN_DATABASE_URL"):
            env.delenv(name, raising=False)
        env.setenv("GRANDBO_DATA_DIR", str(data_dir))
        env.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")
        local_keyring(data_dir / "keyring.json", "demo")  # as `grandbo serve` makes it
        assert main(["demo"]) == 0
        assert main(["export", "--tenant", "demo", "-o", str(lake)]) == 0
        try:
            yield Store(data_dir, lake)
        finally:
            stop_embedded_postgres(data_dir)


@pytest.fixture
def on_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    for name in ("DATABASE_URL", "GRANDBO_ADMIN_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRANDBO_DATA_DIR", str(store.data_dir))
    monkeypatch.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")
    # `grandbo mcp` takes SIGTERM for itself: the test process's own handler comes back
    monkeypatch.setattr(signal, "signal", lambda *_: None)
    return store


def _rows_of(store: Store, tenant: str) -> dict[str, int]:
    """The tables holding a row of `tenant`, and how many."""
    from grandbo.local.bootstrap import resolve_urls

    conn = connect(resolve_urls(store.settings).app)
    try:
        counts = OrganizationPurge(conn).organization_rows(tenant)
    finally:
        conn.close()
    return {table: n for table, n in counts.items() if n}


def _commands(store: Store, tenant: str) -> dict[str, list[str]]:
    """Every command that takes `--tenant`, naming `tenant`, with what else it needs."""
    return {
        "add": ["add", "--tenant", tenant, "--title", "Disk filled", "--summary", TOPIC],
        "correct": ["correct", ENTRY, "--tenant", tenant, "--title", "Disk filled up"],
        "retire": ["retire", ENTRY, "--tenant", tenant, "--reason", "wrong"],
        "redact": ["redact", ENTRY, "--tenant", tenant, "--reason", "a secret", "--yes"],
        "purge-organization": ["purge-organization", "--tenant", tenant, "--confirm", tenant],
        "query": ["query", "--tenant", tenant, TOPIC],
        "embed-pending": ["embed-pending", "--tenant", tenant],
        "rebuild": ["rebuild", "--tenant", tenant, "--verify"],
        "topology load": ["topology", "load", "/dev/null", "--tenant", tenant],
        "topology blast-radius": ["topology", "blast-radius", "--id", "x", "--tenant", tenant],
        "topology criticality": ["topology", "criticality", "--id", "x", "--tenant", tenant],
        "audit": ["audit", "--tenant", tenant],
        "calibrate": ["calibrate", "--tenant", tenant],
        "retrievals": ["retrievals", "--tenant", tenant],
        "export": ["export", "--tenant", tenant, "-o", str(store.data_dir / "out.jsonl")],
        "import": ["import", str(store.lake), "--tenant", tenant, "--rename"],
        "rewrite-redacted": ["rewrite-redacted", "--tenant", tenant, "--yes"],
        "people add": ["people", "add", EMAIL, "--tenant", tenant, "--role", "viewer"],
        "people list": ["people", "list", "--tenant", tenant],
        "people remove": ["people", "remove", EMAIL, "--tenant", tenant],
        "people revoke": ["people", "revoke", EMAIL, "--tenant", tenant],
        "people link": ["people", "link", EMAIL, "--tenant", tenant],
        "console": ["console", "--tenant", tenant, "--port", "0"],
        "mcp": ["mcp", "--tenant", tenant],
    }


CREATES = {"add", "import", "people add", "topology load"}
COMMANDS = sorted(_commands(Store(Path(), Path()), TYPO))


def test_every_command_that_takes_tenant_is_held_to_it_here() -> None:
    """A command given `--tenant` later is refused here too, or this fails (`smoke`
    names an organization whose keys it needs: tests/e2e/test_smoke.py holds it)."""
    taking = {
        name
        for name, parser in every_command(build_parser(), "")
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
        and any("--tenant" in a.option_strings for a in parser._actions)
    }
    assert taking == {*COMMANDS, "smoke"}


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_organization_is_refused_naming_those_that_exist_and_nothing_is_stored(
    on_store: Store, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    keyring_before = on_store.keyring.read_bytes()
    assert main(_commands(on_store, TYPO)[command]) == 1
    err = capsys.readouterr().err
    how = (
        "--create-tenant to create it"
        if command in CREATES
        else "`grandbo add` or `grandbo people add` with --create-tenant creates one"
    )
    assert err == f"grandbo: no organization '{TYPO}' (organizations: demo); {how}\n"
    # nothing stored: no row of it anywhere, no key of it, no file written
    assert _rows_of(on_store, TYPO) == {}
    assert store_organizations(on_store.settings) == {"demo"}
    assert on_store.keyring.read_bytes() == keyring_before
    assert not (on_store.data_dir / "out.jsonl").exists()


def test_an_ill_formed_organization_is_invalid_input_not_unknown(
    on_store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["people", "list", "--tenant", "Demo Org"]) == 2
    assert capsys.readouterr().err.startswith("grandbo: invalid tenant_id: ")


def test_on_a_new_machine_the_demo_organization_is_named_and_no_store_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("DATABASE_URL", "GRANDBO_ADMIN_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["--data-dir", str(tmp_path), "people", "list"]) == 1
    assert capsys.readouterr().err == (
        "grandbo: no organization 'demo' (organizations: none yet); `grandbo demo` seeds it\n"
    )
    assert list(tmp_path.iterdir()) == []  # no store, no keyring made to say so


def test_people_list_of_an_unknown_organization_says_so_not_no_people_yet(
    on_store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["people", "list", "--tenant", "nosuch"]) == 1
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err.startswith("grandbo: no organization 'nosuch' (organizations: demo);")


def test_create_tenant_makes_one_and_then_every_command_knows_it(
    on_store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    made = uuid.uuid4().hex[:6]
    onboarded, written, imported = f"acme-{made}", f"beta-{made}", f"gamma-{made}"
    try:
        # a first person makes an organization in the keyring: onboarded, no memory yet
        add_ann = ["people", "add", EMAIL, "--tenant", onboarded, "--role", "admin"]
        assert main([*add_ann, "--create-tenant"]) == 0
        assert f"{EMAIL} is admin of {onboarded}" in capsys.readouterr().out
        assert main(["people", "list", "--tenant", onboarded, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["people"][0]["email"] == EMAIL
        assert main(["query", "--tenant", onboarded, "--json", TOPIC]) == 0
        assert json.loads(capsys.readouterr().out)["hits"] == []
        # a first entry makes one in the store
        assert main([*_commands(on_store, written)["add"], "--create-tenant"]) == 0
        assert "recorded:" in capsys.readouterr().out
        assert main(["query", "--tenant", written, "--json", TOPIC]) == 0
        assert json.loads(capsys.readouterr().out)["hits"]
        # an import makes one, when told to
        lake = ["import", str(on_store.lake), "--tenant", imported, "--rename", "--no-embed"]
        assert main([*lake, "--create-tenant"]) == 0
        assert f"into {imported}" in capsys.readouterr().out
        # and a refusal names them all now
        assert main(["retrievals", "--tenant", TYPO]) == 1
        named = f"(organizations: {onboarded}, {written}, demo, {imported});"
        assert named in capsys.readouterr().err
    finally:
        # purged and removed, they are gone again: the store is as it was
        for tenant in {written, imported} & store_organizations(on_store.settings):
            main(["purge-organization", "--tenant", tenant, "--confirm", tenant])
        if onboarded in keyring_organizations(on_store.keyring):
            main(["people", "remove", EMAIL, "--tenant", onboarded])
        capsys.readouterr()
    assert store_organizations(on_store.settings) == {"demo"}
    assert keyring_organizations(on_store.keyring) == {"demo"}


def test_a_teams_first_act_may_be_loading_its_topology_and_it_says_so_in_words(
    on_store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "topology.json"
    batch.write_text(
        '{"nodes": [{"node_type": "Service", "external_id": "api"},'
        ' {"node_type": "Service", "external_id": "db"}],'
        ' "edges": [{"source": {"node_type": "Service", "external_id": "api"},'
        ' "edge_type": "DEPENDS_ON", "target": {"node_type": "Service", "external_id": "db"}}]}'
    )
    team = f"team-{uuid.uuid4().hex[:8]}"
    args = ["topology", "load", str(batch), "--tenant", team, "--create-tenant"]
    assert main(args) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"topology of {team} loaded from {batch}: ")
    assert "{" not in said  # sentences, not JSON
    assert main([*args, "--json"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")
    assert _rows_of(on_store, team)["topology_nodes"] == 2


def test_a_sign_in_link_to_the_default_address_says_no_runner_serves(
    on_store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    email = f"ana-{uuid.uuid4().hex[:6]}@example.com"
    assert main(["people", "add", email, "--tenant", "demo", "--role", "viewer"]) == 0
    out, err = capsys.readouterr()
    assert "/login?token=" in out
    assert "no runner serves" in err
    assert "--console" in err
    given = ["people", "link", email, "--tenant", "demo", "--console", "http://c.example:1"]
    assert main(given) == 0
    out, err = capsys.readouterr()
    assert "http://c.example:1/login?token=" in out
    assert "no runner serves" not in err
