"""Issue 35, point 5, over the template: a function allowed to call an AWS service is one
whose clients of that service grandbo.aws_clients bounds (BUILT_BY), so a grant
added without its bound fails here. The bounds themselves: tests/unit/test_aws_clients.py.
"""

from __future__ import annotations

from typing import Any

from grandbo.aws_clients import BUILT_BY

# the IAM actions (https://docs.aws.amazon.com/service-authorization/latest/reference/) a
# function is granted to call each client's service
ACTIONS = {
    "sqs:SendMessage": "sqs",
    "secretsmanager:GetSecretValue": "secretsmanager",
    "bedrock:InvokeModel": "bedrock-runtime",
    "bedrock:Rerank": "bedrock-agent-runtime",
}


def _callers(template: Any) -> dict[str, set[str]]:
    """service -> the grandbo functions whose roles may call it."""
    resources = template.to_json()["Resources"]
    function_of_role = {}
    for resource in resources.values():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        description = resource["Properties"].get("Description", "")
        if description.startswith("grandbo "):
            role = resource["Properties"]["Role"]["Fn::GetAtt"][0]
            function_of_role[role] = description.split()[1].rstrip(":")
    callers: dict[str, set[str]] = {service: set() for service in BUILT_BY}
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        roles = [r["Ref"] for r in resource["Properties"]["Roles"]]
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            for action in actions if isinstance(actions, list) else [actions]:
                if action in ACTIONS:
                    callers[ACTIONS[action]] |= {
                        function_of_role[r] for r in roles if r in function_of_role
                    }
    return callers


def test_every_function_granted_a_service_bounds_its_clients(dev: Any, reranking: Any) -> None:
    callers = _callers(dev[1])
    callers["bedrock-agent-runtime"] = _callers(reranking[1])["bedrock-agent-runtime"]
    for service, functions in callers.items():
        # the walk found the grants (the operator's CLI's services: no function's)
        assert bool(functions) == bool(BUILT_BY[service]), service
        assert functions <= set(BUILT_BY[service]), (service, functions - set(BUILT_BY[service]))


def test_every_function_bounds_its_maintenance_statements_under_its_timeout(dev: Any) -> None:
    """Migration 0031 bounds the app role's statements at 9 s; a maintenance transaction
    lifts that to its function's time less a second (grandbo.storage.tenant_scope)."""
    from infra.functions import SPECS

    resources = dev[1].to_json()["Resources"]
    seen = set()
    for resource in resources.values():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        description = resource["Properties"].get("Description", "")
        if not description.startswith("grandbo "):
            continue
        name = description.split()[1].rstrip(":")
        env = resource["Properties"]["Environment"]["Variables"]
        if name in ("migrations", "index"):  # the schema owner: not the app role
            continue
        bound = env["GRANDBO_MAINTENANCE_STATEMENT_TIMEOUT"]
        assert bound.endswith("s"), (name, bound)
        assert int(bound[:-1]) < SPECS[name].timeout_s, (name, bound)
        seen.add(name)
    assert {"query", "admin", "incident", "embed", "backfill"} <= seen
