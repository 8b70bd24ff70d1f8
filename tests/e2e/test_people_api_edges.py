"""The people routes at their edges (issue 45's break-it review): a malformed keyring file, a
person key written by hand, two admins demoting each other at once, a resent add."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import grandbo.api.people_keyring as people
from grandbo.api.auth import Keyring, SigningKey, keyring_document, new_secret
from grandbo.api.client import AdminClient, GrandboHTTPError
from grandbo.api.people import verify_sign_in_token
from grandbo.errors import AuthenticationError


def _status(call: Any) -> tuple[int, Any]:
    try:
        return 200, call()
    except GrandboHTTPError as exc:
        return exc.status, exc.body


def test_a_malformed_keyring_file_is_a_named_refusal_not_a_500(
    base: str, keyring_file: Path, tenant: str
) -> None:
    """The server keeps its last good keys; a change asked for meanwhile must not be a 500
    (and must not rewrite the file)."""
    admin = AdminClient(base, people.add_person(keyring_file, tenant, "ad@example.com", "admin"))
    admin.call("GET", "/v1/admin/people")  # the server holds the good keys
    keyring_file.write_text('{"keys": [')  # an editor half way through
    status, body = _status(
        lambda: admin.call("POST", "/v1/admin/people", {"email": "x@example.com", "role": "viewer"})
    )
    assert keyring_file.read_text() == '{"keys": ['
    assert (status, body["error"]) == (409, "keyring_unreadable"), body
    assert "nothing was changed" in body["message"]


def test_a_role_change_of_a_hand_written_person_key_keeps_the_keyring_readable(
    base: str, keyring_file: Path, tenant: str
) -> None:
    """A person key written by hand (any key id) changed through the API: the file must
    still be a keyring afterwards (one key per person of an organization)."""
    admin = AdminClient(base, people.add_person(keyring_file, tenant, "ad@example.com", "admin"))
    keys = Keyring.from_json(keyring_file.read_text()).signing_keys()
    hand = SigningKey(
        key_id="ann-laptop",
        tenant_id=tenant,
        secret=new_secret(),
        roles=["admin"],
        person="ann@example.com",
        person_role="viewer",
    )
    keyring_file.write_text(keyring_document([*keys, hand]))
    status, body = _status(
        lambda: admin.call(
            "POST", "/v1/admin/people", {"email": "ann@example.com", "role": "curator"}
        )
    )
    try:
        Keyring.from_json(keyring_file.read_text())
    except Exception as exc:  # the person listed twice: no new process can read the file
        pytest.fail(f"answered {status} {body} and left an unreadable keyring: {exc}")
    assert status == 200, body


def test_two_admins_demoting_each_other_at_once_leave_an_admin(
    base: str, keyring_file: Path, tenant: str
) -> None:
    """Each request is authorized against the keyring as it was before the other's change
    landed: both succeed and the organization has no admin person left."""
    for attempt in range(20):
        a = people.add_person(keyring_file, tenant, "a@example.com", "admin")
        b = people.add_person(keyring_file, tenant, "b@example.com", "admin")
        barrier = threading.Barrier(2)
        results: list[int] = []

        def demote(
            key: SigningKey,
            other: str,
            barrier: threading.Barrier = barrier,
            results: list[int] = results,
        ) -> None:
            client = AdminClient(base, key)
            barrier.wait()
            status, _ = _status(
                lambda: client.call("POST", "/v1/admin/people", {"email": other, "role": "viewer"})
            )
            results.append(status)

        threads = [
            threading.Thread(target=demote, args=(a, "b@example.com")),
            threading.Thread(target=demote, args=(b, "a@example.com")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        admins = [
            k.person
            for k in Keyring.from_json(keyring_file.read_text()).signing_keys()
            if k.tenant_id == tenant and k.person_role == "admin"
        ]
        assert admins, f"attempt {attempt}: both demotions applied {results}, no admin left"


def test_an_add_resent_with_the_same_role_keeps_the_persons_key(
    base: str, keyring_file: Path, tenant: str
) -> None:
    """A console form posted again (a reload) changes nothing: the link made first still
    signs the person in; only another role renews their key."""
    admin = AdminClient(base, people.add_person(keyring_file, tenant, "ad@example.com", "admin"))
    body = {"email": "vi@example.com", "role": "viewer"}
    first = admin.call("POST", "/v1/admin/people", body)
    again = admin.call("POST", "/v1/admin/people", body)
    keyring = Keyring.from_json(keyring_file.read_text())
    assert verify_sign_in_token(keyring, first["sign_in_token"]).person == "vi@example.com"
    assert verify_sign_in_token(keyring, again["sign_in_token"]).person == "vi@example.com"
    admin.call("POST", "/v1/admin/people", {**body, "role": "curator"})
    with pytest.raises(AuthenticationError):
        verify_sign_in_token(Keyring.from_json(keyring_file.read_text()), first["sign_in_token"])
