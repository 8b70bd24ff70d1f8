"""People, roles and personal keys (issue 36, point 1), through the local gateway and the
admin Lambda's handler, with the keyring read from its file as `grandbo serve` reads it.

A viewer's write is a 403 naming the role and writes nothing; a curator curates but may
not redact; an admin may; every event a person writes names them (`person:EMAIL`); a
person removed from the keyring is refused at their next request."""

from __future__ import annotations

import getpass
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from functions.admin_api.handler import app as admin_app

from grandbo.api import people_keyring as people
from grandbo.api.client import AdminClient, GrandboHTTPError
from grandbo.api.people import ADMIN_ROUTE_ROLES, role_needed
from grandbo.cli import default_actor, main

LESSON = {
    "title": "Connection pool exhausted by a retry storm",
    "summary": "Checkout retried every failed call at once and exhausted the pool.",
}


def _refusal(call: Any) -> GrandboHTTPError:
    with pytest.raises(GrandboHTTPError) as refused:
        call()
    return refused.value


def test_each_role_does_what_it_may_and_is_refused_the_rest(
    base: str, keyring_file: Path, tenant: str
) -> None:
    viewer = AdminClient(base, people.add_person(keyring_file, tenant, "Vi@Example.com", "viewer"))
    curator = AdminClient(
        base, people.add_person(keyring_file, tenant, "cu@example.com", "curator")
    )
    admin = AdminClient(base, people.add_person(keyring_file, tenant, "ad@example.com", "admin"))

    # a viewer reads, and every write of theirs is a 403 that names the role and stores nothing
    assert viewer.call("POST", "/v1/admin/catalog", {})["entries"] == []
    refused = _refusal(lambda: viewer.call("POST", "/v1/admin/entries", LESSON))
    assert refused.status == 403
    assert refused.body["error"] == "forbidden"
    assert "role viewer may not POST /v1/admin/entries" in refused.body["message"]
    assert "curator" in refused.body["message"]
    # refused before validation: a viewer's malformed write is a 403, not a hint at its shape
    assert _refusal(lambda: viewer.call("POST", "/v1/admin/entries", {"x": 1})).status == 403
    assert viewer.call("POST", "/v1/admin/catalog", {})["entries"] == []

    # a curator creates and corrects; redaction, settings and purge are an admin's
    created = curator.call("POST", "/v1/admin/entries", LESSON)["entry"]
    entry_id = created["entry_id"]
    curator.call(
        "POST",
        f"/v1/admin/entries/{entry_id}/corrections",
        {"summary": "Checkout retried every failed call at once; jittered back-off fixed it."},
    )
    for path, body in (
        (f"/v1/admin/entries/{entry_id}/redaction", {"reason": "holds a customer's name"}),
        ("/v1/admin/settings", {"episodic_ttl_days": 30}),
        ("/v1/admin/purge", {"organization": tenant}),
    ):
        refused = _refusal(lambda p=path, b=body: curator.call("POST", p, b))
        assert refused.status == 403, path
        assert "role curator may not" in refused.body["message"]
    assert (
        _refusal(
            lambda: viewer.call("POST", f"/v1/admin/entries/{entry_id}/retirement", {"reason": "x"})
        ).status
        == 403
    )

    # every event names the person who wrote it, as history shows it
    admin.call("POST", "/v1/admin/settings", {"episodic_ttl_days": 45})
    admin.call(
        "POST", f"/v1/admin/entries/{entry_id}/redaction", {"reason": "holds a customer's name"}
    )
    history = admin.call("GET", f"/v1/admin/entries/{entry_id}/history")
    actors = [event["actor"] for event in history["events"]]
    assert sorted(actors) == [
        "person:ad@example.com",
        "person:cu@example.com",
        "person:cu@example.com",
    ], actors


def test_a_removed_person_is_refused_at_their_next_request(
    base: str, keyring_file: Path, tenant: str
) -> None:
    key = people.add_person(keyring_file, tenant, "leaver@example.com", "curator")
    client = AdminClient(base, key)
    client.call("POST", "/v1/admin/entries", LESSON)
    people.remove_person(keyring_file, tenant, "leaver@example.com")
    assert _refusal(lambda: client.call("POST", "/v1/admin/catalog", {})).status == 401
    # renewed: the old key is refused, the new one serves
    key = people.add_person(keyring_file, tenant, "mover@example.com", "viewer")
    renewed = people.renew_person(keyring_file, tenant, "mover@example.com")
    assert _refusal(lambda: AdminClient(base, key).call("GET", "/v1/admin/settings")).status == 401
    assert AdminClient(base, renewed).call("GET", "/v1/admin/settings")["episodic_ttl_days"] > 0


def test_the_role_table_names_every_admin_route() -> None:
    """A route added to the admin API without a role in the table would be refused to every
    person but an admin: the table and the routes are held together here."""
    schema = admin_app.get_openapi_schema()
    routes = {
        (method.upper(), re.sub(r"\{([a-z_]+)\}", r"<\1>", path))
        for path, item in schema.paths.items()
        for method in ("get", "post", "put", "delete", "patch")
        if getattr(item, method, None) is not None
    }
    assert routes == set(ADMIN_ROUTE_ROLES)
    assert role_needed("POST", "/v1/admin/entries/3f2c/redaction") == "admin"
    assert role_needed("GET", "/v1/admin/entries/3f2c/history") == "viewer"
    assert role_needed("POST", "/v1/admin/no-such-route") == "admin"


def test_people_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    keyring = tmp_path / "data" / "keyring.json"
    ann = ["people", "add", "Ann@Example.com", "--tenant", "acme", "--role", "curator"]
    # a new organization is made only when asked for; its first person makes it
    assert main([*data, *ann]) == 1
    assert "no organization 'acme'" in capsys.readouterr().err
    assert main([*data, *ann, "--create-tenant"]) == 0
    added = capsys.readouterr().out
    assert "ann@example.com is curator of acme" in added
    link = re.search(r"http://127\.0\.0\.1:8790/login\?token=(gbl1\.\S+)", added)
    assert link is not None
    assert (
        main([*data, "people", "add", "bob@example.com", "--tenant", "acme", "--role", "viewer"])
        == 0
    )
    eve = ["people", "add", "eve@example.com", "--tenant", "other", "--role", "admin"]
    assert main([*data, *eve, "--create-tenant"]) == 0
    capsys.readouterr()
    assert main([*data, "people", "list", "--tenant", "acme", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(p["email"], p["role"]) for p in listed["people"]] == [
        ("ann@example.com", "curator"),
        ("bob@example.com", "viewer"),
    ]
    # the key records the person, and the secret never leaves the keyring
    document = json.loads(keyring.read_text())
    ann = next(k for k in document["keys"] if k.get("person") == "ann@example.com")
    assert ann["person_role"] == "curator"
    assert ann["tenant_id"] == "acme"
    assert ann["secret"] not in json.dumps(listed)
    assert oct(keyring.stat().st_mode)[-3:] == "600"

    assert main([*data, "people", "remove", "bob@example.com", "--tenant", "acme"]) == 0
    assert main([*data, "people", "remove", "bob@example.com", "--tenant", "acme"]) == 1
    assert "no person bob@example.com in organization acme" in capsys.readouterr().err
    assert (
        main([*data, "people", "add", "not-an-address", "--tenant", "acme", "--role", "viewer"])
        == 2
    )
    assert "person" in capsys.readouterr().err
    # a link's lifetime out of range refuses the command before anyone is written
    for days in ("0", "91", "seven"):
        add_carol = ["people", "add", "carol@example.com", "--tenant", "acme", "--days", days]
        with pytest.raises(SystemExit) as refused:
            main([*data, *add_carol, "--role", "viewer"])
        assert refused.value.code == 2
        assert "--days" in capsys.readouterr().err
    assert "carol@example.com" not in keyring.read_text()
    # the CLI's writes name the operating-system user unless told otherwise
    assert default_actor() == f"cli:{getpass.getuser()}"


def test_people_added_together_are_all_kept(tmp_path: Path, tenant: str) -> None:
    keyring = tmp_path / "keyring.json"
    threads = [
        threading.Thread(
            target=people.add_person, args=(keyring, tenant, f"p{n}@example.com", "viewer")
        )
        for n in range(12)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(people.people(keyring, tenant)) == 12
