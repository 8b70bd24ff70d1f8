"""`grandbo console --url`'s admin key: one key's JSON, or a keyring with the key named;
anything else is refused by name, never used, and never quoted (its secret with it)."""

from __future__ import annotations

import json
import traceback

import pytest
from pydantic import ValidationError

from grandbo.api.auth import SigningKey, keyring_document, new_secret
from grandbo.commands.console import admin_key
from grandbo.errors import GrandboError


def _key(key_id: str, role: str) -> SigningKey:
    return SigningKey(key_id=key_id, tenant_id="acme", secret=new_secret(), roles=[role])  # type: ignore[list-item]


def test_one_key_or_a_keyring_with_one_admin_key() -> None:
    admin = _key("acme-admin", "admin")
    assert admin_key(admin.model_dump_json(), None) == admin
    document = keyring_document([admin, _key("acme-beacon", "query")])
    assert admin_key(document, None) == admin
    assert admin_key(document, "acme-admin") == admin


def test_refused_keys_name_the_problem() -> None:
    with pytest.raises(GrandboError, match="not JSON"):
        admin_key("{not json", None)
    with pytest.raises(GrandboError, match="not an admin key"):
        admin_key(_key("acme-beacon", "query").model_dump_json(), None)
    several = keyring_document([_key("a-admin", "admin"), _key("b-admin", "admin")])
    with pytest.raises(GrandboError, match="--key-id"):
        admin_key(several, None)
    with pytest.raises(GrandboError):
        admin_key(keyring_document([_key("acme-beacon", "query")]), "acme-beacon")
    with pytest.raises(ValidationError, match="secret"):
        admin_key(json.dumps({"key_id": "x"}), None)


def test_a_malformed_keyring_says_where_without_quoting_its_secrets() -> None:
    secret = new_secret()
    missing_tenant = json.dumps({"keys": [{"secret": secret, "key_id": "a", "roles": ["admin"]}]})
    wrong_role = json.dumps(
        {"keys": [{"key_id": "a", "tenant_id": "acme", "secret": secret, "roles": ["admn"]}]}
    )
    for document in (missing_tenant, wrong_role):
        with pytest.raises(GrandboError, match=r"keys\.0") as refused:
            admin_key(document, None)
        # neither its message nor a logged traceback of it (the chained pydantic error)
        logged = "".join(traceback.format_exception(refused.value))
        assert secret[:8] not in logged
