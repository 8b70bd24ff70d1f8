"""Issue 36, point 2: people sign in with their organization's identity in AWS. The admin
routes are offered again under /v1/iam/admin, authorized by API Gateway with AWS's own
signature (SigV4; the method's authorization type AWS_IAM); the stack keeps which IAM
Identity Center permission set stands for which organization and role
(`-c iam_people`), and outputs the execute-api ARN a permission set's policy grants."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
