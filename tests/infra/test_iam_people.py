"""Issue 36, point 2: people sign in with their organization's identity in AWS. The admin
routes are offered again under /v1/iam/admin, authorized by API Gateway with AWS's own
signature (SigV4; the method's authorization type AWS_IAM); the stack keeps which IAM
Identity Center permission set stands for which organization and role
(`-c iam_people`), and outputs the execute-api ARN a permission set's policy grants."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

import pytest

from grandbo.api.edge import ROUTES

from .conftest import _synth

MAPPING = [
    {"permission_set": "GrandboAcmeCurators", "tenant_id": "acme", "role": "curator"},
    {"permission_set": "GrandboAcmeViewers", "tenant_id": "acme", "role": "viewer"},
]


def _admin_environment(template: Any) -> dict[str, Any]:
    functions = template.find_resources("AWS::Lambda::Function")
    admin = [f for name, f in functions.items() if name.startswith("FunctionsAdminFunction")]
    assert len(admin) == 1
    return dict(admin[0]["Properties"]["Environment"]["Variables"])


def test_the_iam_admin_routes_take_aws_signatures_only(dev: tuple[Any, Any]) -> None:
    _, template = dev
    resources = template.find_resources("AWS::ApiGateway::Resource")
    parts = {r["Properties"]["PathPart"] for r in resources.values()}
    assert {"iam", "{proxy+}"} <= parts
    methods = template.find_resources("AWS::ApiGateway::Method")
    iam = [m for m in methods.values() if m["Properties"]["AuthorizationType"] == "AWS_IAM"]
    assert len(iam) == 1
    assert iam[0]["Properties"]["HttpMethod"] == "ANY"
    # nothing maps by default: every IAM caller is refused until the stack is told
    assert json.loads(_admin_environment(template)["GRANDBO_IAM_PEOPLE"]) == {"permission_sets": []}
    outputs = template.find_outputs("AdminIamRoutesArn")
    assert "/v1/iam/admin/*" in json.dumps(outputs)


def test_the_mapping_is_the_stacks_and_checked_before_it_deploys() -> None:
    _, template = _synth("dev", iam_people=json.dumps(MAPPING))
    kept = json.loads(_admin_environment(template)["GRANDBO_IAM_PEOPLE"])
    assert kept["permission_sets"] == MAPPING
    for bad in (
        [{"permission_set": "Grandbo", "tenant_id": "acme", "role": "owner"}],
        [{"permission_set": "has space", "tenant_id": "acme", "role": "viewer"}],
        [MAPPING[0], MAPPING[0]],
    ):
        with pytest.raises(Exception, match="GRANDBO_IAM_PEOPLE"):
            _synth("dev", iam_people=json.dumps(bad))


def _policy(template: Any) -> list[dict[str, Any]]:
    (api,) = template.find_resources("AWS::ApiGateway::RestApi").values()
    return list(api["Properties"]["Policy"]["Statement"])


def _matches(pattern: str, value: str) -> bool:
    """IAM's wildcard match: `*` any run of characters (slashes too), `?` one."""
    return fnmatch.fnmatchcase(value, pattern)


def _resources(statement: dict[str, Any]) -> list[str]:
    given = statement["Resource"]
    return [given] if isinstance(given, str) else list(given)


def _sso_pattern(statement: dict[str, Any]) -> str:
    """The Deny's aws:PrincipalArn pattern, with the stack's partition and account."""
    value = statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    parts = value["Fn::Join"][1]
    names = {"AWS::Partition": "aws", "AWS::AccountId": "123456789012"}
    return "".join(p if isinstance(p, str) else names[p["Ref"]] for p in parts)


def test_the_iam_routes_are_for_identity_centers_roles_only(dev: tuple[Any, Any]) -> None:
    """The API's resource policy: every other route open to the authorizer or the HMAC
    check that guards it; the /v1/iam routes given no allow (a caller needs
    execute-api:Invoke of their own) and denied to any principal that is not one of IAM
    Identity Center's roles (under aws-reserved/sso.amazonaws.com/)."""
    _, template = dev
    statements = _policy(template)
    allow = [s for s in statements if s["Effect"] == "Allow"]
    deny = [s for s in statements if s["Effect"] == "Deny"]
    assert len(allow) == 1
    assert len(deny) == 1
    assert allow[0]["Principal"] == {"AWS": "*"}
    assert allow[0]["Action"] == "execute-api:Invoke"
    uuid = "0b6c5c2e-6d0e-4bd5-9a43-0d7f5a0c2f11"
    # every route the stack serves, as API Gateway names a request to it
    for route in ROUTES:
        path = re.sub(r"\{[^}]+\}", uuid, route.resource).replace(f"{uuid}+", "x/y")
        method = "POST" if route.method == "ANY" else route.method
        request = f"execute-api:/dev/{method}{path}"
        allowed = any(_matches(p, request) for p in _resources(allow[0]))
        denied = any(_matches(p, request) for p in _resources(deny[0]))
        if route.auth == "iam":
            assert (allowed, denied) == (False, True), request
        else:
            assert (allowed, denied) == (True, False), request
    for request in (
        "execute-api:/dev/GET/v1/iam/admin/whoami",
        "execute-api:/dev/POST/v1/iam/admin/entries/x/corrections",
        # `*` matches `/` too: a path made to end like an open route is not opened
        "execute-api:/dev/GET/v1/iam/admin/x/v1/admin/entries",
        "execute-api:/dev/POST/v1/iam/admin/x/v1/memory/query",
    ):
        assert not any(_matches(p, request) for p in _resources(allow[0]))
        assert any(_matches(p, request) for p in _resources(deny[0]))
    # the Deny spares the roles Identity Center made, and no role named like them
    sso = _sso_pattern(deny[0])
    identity_center = (
        "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/eu-west-1/"
        "AWSReservedSSO_GrandboAcmeCurators_0a1b2c3d4e5f6a7b"
    )
    assert _matches(sso, identity_center)
    for impostor in (
        "arn:aws:iam::123456789012:role/AWSReservedSSO_GrandboAcmeCurators_0a1b2c3d4e5f6a7b",
        "arn:aws:iam::123456789012:role/team/aws-reserved/sso.amazonaws.com/AWSReservedSSO_X_0",
        "arn:aws:iam::210987654321:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_X_0",
        "arn:aws:iam::123456789012:user/ann",
    ):
        assert not _matches(sso, impostor), impostor
