"""The admin API's people routes (issue 45, the console's people page): through the local
gateway and the admin Lambda's handler, with the keyring read from its file as `grandbo
serve` reads it; and a deployed stack's, whose keys are a secret it only reads.

An admin lists, adds with a role, links, revokes and removes; each change holds at the
person's next request; nobody else may; another organization's people are neither listed
nor reachable; an admin cannot lock themselves out; concurrent adds lose nobody."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import grandbo.api.people_keyring as people
from grandbo.api.auth import Keyring, SigningKey, keyring_document, new_secret
from grandbo.api.client import AdminClient, GrandboHTTPError
from grandbo.api.people import verify_sign_in_token
from grandbo.storage.connections import DatabaseUrls

from .conftest import stop_runner

OTHER = "people-api-other-org"


def _refusal(call: Any) -> GrandboHTTPError:
    with pytest.raises(GrandboHTTPError) as refused:
        call()
    return refused.value


def _keyring(path: Path) -> Keyring:
    return Keyring.from_json(path.read_text())


def test_an_admin_manages_the_organizations_people(
    base: str, keyring_file: Path, tenant: str
) -> None:
    admin = AdminClient(base, people.add_person(keyring_file, tenant, "ad@example.com", "admin"))
    listed = admin.call("GET", "/v1/admin/people")
    assert listed["organization"] == tenant
    assert listed["managed_here"] is True
    assert [(p["email"], p["role"], p["you"]) for p in listed["people"]] == [
        ("ad@example.com", "admin", True)
    ]
    assert listed["services"][0]["stands_for"] == "the incident pipeline"
    assert "secret" not in str(listed)

    # added with a role: 201, a token the keyring verifies as that person's, good for 3 days
    added = admin.call(
        "POST", "/v1/admin/people", {"email": " Vi@Example.com ", "role": "viewer", "link_days": 3}
    )
    assert added["person"]["email"] == "vi@example.com"
    assert added["person"]["role"] == "viewer"
    assert added["link_days"] == 3
    key = verify_sign_in_token(_keyring(keyring_file), added["sign_in_token"])
    assert key.person == "vi@example.com"
    viewer = AdminClient(base, key)
    assert viewer.call("POST", "/v1/admin/catalog", {})["entries"] == []
    # a viewer may not see or change the people
    assert _refusal(lambda: viewer.call("GET", "/v1/admin/people")).status == 403

    # the role changed: their key is renewed, so the old one is refused at once
    changed = admin.call("POST", "/v1/admin/people", {"email": "vi@example.com", "role": "curator"})
    assert changed["person"]["role"] == "curator"
    assert _refusal(lambda: viewer.call("POST", "/v1/admin/catalog", {})).status == 401
    curator = AdminClient(
        base, verify_sign_in_token(_keyring(keyring_file), changed["sign_in_token"])
    )
    assert curator.call("POST", "/v1/admin/catalog", {})["entries"] == []
    assert (
        _refusal(
            lambda: curator.call("POST", "/v1/admin/people/link", {"email": "vi@example.com"})
        ).status
        == 403
    )

    # a new link: the earlier one still verifies (links end with the key, not each other)
    linked = admin.call("POST", "/v1/admin/people/link", {"email": "vi@example.com"})
    for token in (linked["sign_in_token"], changed["sign_in_token"]):
        assert verify_sign_in_token(_keyring(keyring_file), token).person == "vi@example.com"

    # revoked: every link and the key it held end
    admin.call("POST", "/v1/admin/people/revocation", {"email": "vi@example.com"})
    assert _refusal(lambda: curator.call("POST", "/v1/admin/catalog", {})).status == 401
    for token in (linked["sign_in_token"], changed["sign_in_token"]):
        with pytest.raises(Exception, match=r"revoked|unknown"):
            verify_sign_in_token(_keyring(keyring_file), token)

    # removed: gone from the list and the keyring
    removed = admin.call("POST", "/v1/admin/people/removal", {"email": "vi@example.com"})
    assert removed["removed"] is True
    assert [p["email"] for p in admin.call("GET", "/v1/admin/people")["people"]] == [
        "ad@example.com"
    ]
    missing = _refusal(
        lambda: admin.call("POST", "/v1/admin/people/removal", {"email": "vi@example.com"})
    )
    assert (missing.status, missing.body["error"], missing.body["field"]) == (
        404,
        "not_found",
        "email",
    )


def test_bad_input_is_refused_by_name_and_changes_nothing(
    base: str, keyring_file: Path, tenant: str
) -> None:
    admin = AdminClient(base, people.add_person(keyring_file, tenant, "ad@example.com", "admin"))
    before = keyring_file.read_bytes()
    for body, field in (
        ({"email": "not-an-address", "role": "viewer"}, "email"),
        ({"email": "x@example.com", "role": "owner"}, "role"),
        ({"email": "x@example.com", "role": "viewer", "link_days": 0}, "link_days"),
        ({"email": "x@example.com", "role": "viewer", "link_days": 91}, "link_days"),
        ({"email": "x@example.com", "role": "viewer", "secret": "mine"}, "secret"),
        ({"email": "a" * 400 + "@example.com", "role": "viewer"}, "email"),
    ):
        refused = _refusal(lambda b=body: admin.call("POST", "/v1/admin/people", b))
        assert refused.status in (400, 422), (body, refused.body)
        assert field in str(refused.body), (body, refused.body)
    # an admin cannot demote, renew or remove themselves: another admin does
    for path, body in (
        ("/v1/admin/people", {"email": "AD@example.com", "role": "viewer"}),
        ("/v1/admin/people/revocation", {"email": "ad@example.com"}),
        ("/v1/admin/people/removal", {"email": "ad@example.com"}),
    ):
        refused = _refusal(lambda p=path, b=body: admin.call("POST", p, b))
        assert refused.status == 400, refused.body
        assert refused.body["field"] == "email"
        assert "is you" in refused.body["message"]
    assert keyring_file.read_bytes() == before


def test_another_organizations_people_are_out_of_reach(
    base: str, keyring_file: Path, tenant: str
) -> None:
    admin = AdminClient(base, people.add_person(keyring_file, tenant, "ad@example.com", "admin"))
    people.add_person(keyring_file, OTHER, "theirs@example.com", "admin")
    other_admin = people.add_person(keyring_file, OTHER, "boss@example.com", "admin")
    listed = admin.call("GET", "/v1/admin/people")
    assert "theirs@example.com" not in str(listed)
    assert OTHER not in str(listed)
    for path in (
        "/v1/admin/people/link",
        "/v1/admin/people/revocation",
        "/v1/admin/people/removal",
    ):
        refused = _refusal(lambda p=path: admin.call("POST", p, {"email": "theirs@example.com"}))
        assert refused.status == 404, (path, refused.body)
    # the same address added here is a person of this organization, with a key of its own
    admin.call("POST", "/v1/admin/people", {"email": "theirs@example.com", "role": "viewer"})
    theirs = [k for k in _keyring(keyring_file).signing_keys() if k.person == "theirs@example.com"]
    assert sorted(k.tenant_id for k in theirs) == sorted([tenant, OTHER])
    assert len({k.key_id for k in theirs}) == 2
    # the other organization's admin still signs in as before
    assert AdminClient(base, other_admin).call("GET", "/v1/admin/people")["organization"] == OTHER


def test_concurrent_adds_lose_nobody(base: str, keyring_file: Path, tenant: str) -> None:
    admin_key = people.add_person(keyring_file, tenant, "ad@example.com", "admin")
    errors: list[BaseException] = []

    def add(n: int) -> None:
        try:
            client = AdminClient(base, admin_key)
            client.call(
                "POST", "/v1/admin/people", {"email": f"p{n}@example.com", "role": "viewer"}
            )
        except BaseException as exc:  # a thread's failure is the test's
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    listed = AdminClient(base, admin_key).call("GET", "/v1/admin/people")["people"]
    assert sorted(p["email"] for p in listed) == sorted(
        ["ad@example.com", *(f"p{n}@example.com" for n in range(12))]
    )


def test_a_deployed_stack_lists_its_people_and_refuses_a_change(
    aws_credentials: None, database: DatabaseUrls, tenant: str
) -> None:
    """A stack whose keys are a secret (moto's Secrets Manager): the functions only read it
    (their role has no PutSecretValue), so the list answers, with the permission sets the
    stack maps to the organization, and a change is a 409 naming where people are managed;
    the secret is unchanged."""
    import json

    import boto3
    from moto import mock_aws

    from grandbo.local.runner import serve
    from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime
    from grandbo.runtime.secrets import _secrets

    admin = SigningKey(
        key_id="person-deployed-admin",
        tenant_id=tenant,
        secret=new_secret(),
        roles=["admin"],
        person="ad@example.com",
        person_role="admin",
    )
    mapping = {
        "permission_sets": [
            {"permission_set": "GrandboOnCall", "tenant_id": tenant, "role": "curator"},
            {"permission_set": "TheirAdmins", "tenant_id": OTHER, "role": "admin"},
        ]
    }
    with mock_aws():
        _secrets.cache_clear()
        secrets = boto3.client("secretsmanager")
        arn = secrets.create_secret(Name="grandbo/keyring", SecretString=keyring_document([admin]))[
            "ARN"
        ]
        env = LambdaEnvironment.model_validate(
            {
                "DATABASE_URL": database.app,
                "GRANDBO_EMBEDDING_PROVIDER": "fake",
                "GRANDBO_KEYRING_SECRET_ARN": arn,
                "GRANDBO_IAM_PEOPLE": json.dumps(mapping),
            }
        )
        install_runtime(LambdaRuntime(env, containers=1))
        server = serve("127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        try:
            client = AdminClient(f"http://127.0.0.1:{server.server_address[1]}", admin)
            listed = client.call("GET", "/v1/admin/people")
            assert listed["managed_here"] is False
            assert "IAM Identity Center" in listed["managed_by"]
            assert [p["email"] for p in listed["people"]] == ["ad@example.com"]
            assert listed["permission_sets"] == [
                {"permission_set": "GrandboOnCall", "role": "curator"}
            ]
            for path, body in (
                ("/v1/admin/people", {"email": "new@example.com", "role": "viewer"}),
                ("/v1/admin/people/link", {"email": "ad@example.com"}),
                ("/v1/admin/people/revocation", {"email": "x@example.com"}),
                ("/v1/admin/people/removal", {"email": "x@example.com"}),
            ):
                refused = _refusal(lambda p=path, b=body: client.call("POST", p, b))
                assert (refused.status, refused.body["error"]) == (409, "people_managed_elsewhere")
                assert "IAM Identity Center" in refused.body["message"]
            stored = secrets.get_secret_value(SecretId=arn)["SecretString"]
            assert stored == keyring_document([admin])
        finally:
            stop_runner(server)
            _secrets.cache_clear()
