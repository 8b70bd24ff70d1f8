"""The stage's WAF lets Grandbo's clients and its incident text through (issue 23, items
1-3), read from the synthesized templates.

AWS's Core rule set (https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html):
`NoUserAgent_HEADER` "inspects for requests that are missing the HTTP User-Agent
header" (Block); the body rules `GenericRFI_BODY`, `GenericLFI_BODY`,
`EC2MetaDataSSRF_BODY`, `CrossSiteScripting_BODY` and `SizeRestrictions_BODY` block by
default. A custom response of a Block action takes precedence over the protected
resource's own (https://docs.aws.amazon.com/waf/latest/developerguide/customizing-the-response-for-blocked-requests.html).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.config import WAF_RATE_WINDOW_S, stage_config

from grandbo.api.edge import (
    BODY_TOO_LARGE,
    GATEWAY_RESPONSES,
    NO_USER_AGENT,
    RATE_LIMITED,
    ROUTES,
)

from .legitimate_bodies import LEGITIMATE_FINDINGS

# The rules that read the body, from AWS's tables for each rule group
CORE_BODY_RULES = {
    "SizeRestrictions_BODY",
    "GenericRFI_BODY",
    "GenericLFI_BODY",
    "EC2MetaDataSSRF_BODY",
    "CrossSiteScripting_BODY",
}
KNOWN_BAD_BODY_RULES = {"Log4JRCE_BODY", "JavaDeserializationRCE_BODY"}
BODY_RULES = {
    "AWSManagedRulesCommonRuleSet": CORE_BODY_RULES,
    "AWSManagedRulesKnownBadInputsRuleSet": KNOWN_BAD_BODY_RULES,
}


def _acl(template: Any) -> dict[str, Any]:
    (acl,) = template.find_resources("AWS::WAFv2::WebACL").values()
    return dict(acl["Properties"])


def _overrides(
    acl: dict[str, Any], group: str = "AWSManagedRulesCommonRuleSet"
) -> dict[str, dict[str, Any]]:
    rules = {rule["Name"]: rule for rule in acl["Rules"]}
    managed_rule = rules[group]
    # the group's own actions, less the overrides
    assert managed_rule["OverrideAction"] == {"None": {}}
    managed = managed_rule["Statement"]["ManagedRuleGroupStatement"]
    return {o["Name"]: o["ActionToUse"] for o in managed.get("RuleActionOverrides", [])}


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_a_request_without_a_user_agent_is_blocked_with_the_edges_document(
    stage: str, dev: Any, prod: Any
) -> None:
    _, t = {"dev": dev, "prod": prod}[stage]
    acl = _acl(t)
    action = _overrides(acl)["NoUserAgent_HEADER"]
    response = action["Block"]["CustomResponse"]
    assert response["ResponseCode"] == NO_USER_AGENT.status
    body = acl["CustomResponseBodies"][response["CustomResponseBodyKey"]]
    assert body["ContentType"] == "APPLICATION_JSON"
    assert json.loads(body["Content"]) == NO_USER_AGENT.document()


@pytest.mark.parametrize("finding", LEGITIMATE_FINDINGS, ids=lambda f: f.rule)
def test_every_body_rule_legitimate_incident_text_trips_only_counts(
    finding: Any, dev: Any, prod: Any
) -> None:
    assert finding.rule in BODY_RULES[finding.group]
    for _, t in (dev, prod):
        assert _overrides(_acl(t), finding.group)[finding.rule] == {"Count": {}}, finding.rule


def test_every_core_body_rule_counts_and_every_other_rule_keeps_its_action(dev: Any) -> None:
    """Only body rules are counted (each with its reason in infra/waf.py); the header,
    path and query-string rules of the group keep blocking."""
    from infra.waf import COUNTED_BODY_RULES, COUNTED_KNOWN_BAD_BODY_RULES

    _, t = dev
    overrides = _overrides(_acl(t))
    assert set(COUNTED_BODY_RULES) == CORE_BODY_RULES
    counted = {name for name, action in overrides.items() if action == {"Count": {}}}
    assert counted == CORE_BODY_RULES
    assert set(overrides) == CORE_BODY_RULES | {"NoUserAgent_HEADER"}
    known_bad = _overrides(_acl(t), "AWSManagedRulesKnownBadInputsRuleSet")
    assert known_bad == {rule: {"Count": {}} for rule in KNOWN_BAD_BODY_RULES}
    assert set(COUNTED_KNOWN_BAD_BODY_RULES) == KNOWN_BAD_BODY_RULES
    reasons = {**COUNTED_BODY_RULES, **COUNTED_KNOWN_BAD_BODY_RULES}.values()
    assert all(reason.strip() for reason in reasons)
    # what each counted rule no longer blocks is covered by a legitimate finding
    assert {f.rule for f in LEGITIMATE_FINDINGS} == (CORE_BODY_RULES | KNOWN_BAD_BODY_RULES) - {
        "SizeRestrictions_BODY"
    }


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_per_address_rate_is_the_stages_whole_throttle(stage: str, dev: Any, prod: Any) -> None:
    """Grandbo's callers sit behind one NAT address: the WAF lets one address use the
    stage's whole API throttle (requests per second over the rule's window), no less."""
    _, t = {"dev": dev, "prod": prod}[stage]
    config = stage_config(stage)
    (rate,) = [rule for rule in _acl(t)["Rules"] if rule["Name"] == "RatePerIp"]
    statement = rate["Statement"]["RateBasedStatement"]
    assert statement["EvaluationWindowSec"] == WAF_RATE_WINDOW_S
    assert statement["Limit"] == config.api_rate_limit * WAF_RATE_WINDOW_S
    (stage_resource,) = t.find_resources("AWS::ApiGateway::Stage").values()
    (settings,) = stage_resource["Properties"]["MethodSettings"]
    assert statement["Limit"] / statement["EvaluationWindowSec"] == settings["ThrottlingRateLimit"]
    response = rate["Action"]["Block"]["CustomResponse"]
    assert response["ResponseCode"] == RATE_LIMITED.status


def test_api_gateways_refusals_answer_with_the_edges_documents(dev: Any) -> None:
    _, t = dev
    found = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in t.find_resources("AWS::ApiGateway::GatewayResponse").values()
    }
    assert set(found) == set(GATEWAY_RESPONSES)
    for response_type, refusal in GATEWAY_RESPONSES.items():
        props = found[response_type]
        assert props["StatusCode"] == str(refusal.status)
        assert json.loads(props["ResponseTemplates"]["application/json"]) == refusal.document()
    assert GATEWAY_RESPONSES["REQUEST_TOO_LARGE"] == BODY_TOO_LARGE


def test_every_edge_route_is_a_method_of_the_api_and_nothing_else_is(dev: Any) -> None:
    _, t = dev
    methods = t.find_resources("AWS::ApiGateway::Method")
    assert len(methods) == len(ROUTES)
    by_auth = sorted(m["Properties"]["AuthorizationType"] for m in methods.values())
    # the iam routes take AWS's signature: "clients must use Signature Version 4 (SigV4) to
    # sign their requests with AWS credentials. API Gateway invokes your API route only if
    # the client has execute-api permission for the route" (as for REST APIs:
    # https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-access-control-iam.html)
    expected = {"token": "CUSTOM", "signed": "NONE", "iam": "AWS_IAM"}
    assert by_auth == sorted(expected[route.auth] for route in ROUTES)


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_each_query_token_is_bounded_on_the_query_route_above_every_organizations_rate(
    stage: str, dev: Any, prod: Any
) -> None:
    """Issue 51, point 4: a rate-based rule keyed on the caller's token header, scoped to
    the query route (a scope-down statement narrows "the set of requests that the
    containing rule evaluates":
    https://docs.aws.amazon.com/waf/latest/developerguide/waf-rule-scope-down-statements.html),
    with headroom over the highest rate an organization can set, since AWS documents rate
    counts as approximate. The header is lowercased and its spaces compressed before it
    keys the count ("used in rate-based rule statements, to transform request components
    before using them as custom aggregation keys":
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-wafv2-webacl-ratelimitheader.html),
    so `bearer` and extra spaces share the canonical spelling's counter. AWS documents the
    evaluation windows as 60, 120, 300 or 600 s and the lowest limit as 10
    (https://docs.aws.amazon.com/waf/latest/developerguide/waf-rule-statement-type-rate-based-high-level-settings.html)
    and that "web requests that are missing any of the components specified in the
    aggregation keys are omitted from the rate-based rule evaluation"
    (https://docs.aws.amazon.com/waf/latest/APIReference/API_RateBasedStatementCustomKey.html):
    a request without the header is left to the authorizer."""
    from grandbo.api.edge import QUERY_PATH, TOKEN_RATE_LIMITED
    from grandbo.memory.service import MAX_QUERY_RATE_PER_MINUTE

    _, t = {"dev": dev, "prod": prod}[stage]
    acl = _acl(t)
    (rule,) = [rule for rule in acl["Rules"] if rule["Name"] == "RatePerToken"]
    statement = rule["Statement"]["RateBasedStatement"]
    assert statement["AggregateKeyType"] == "CUSTOM_KEYS"
    (key,) = statement["CustomKeys"]
    assert key["Header"]["Name"].lower() == "authorization"
    transforms = sorted(key["Header"]["TextTransformations"], key=lambda x: x["Priority"])
    assert [x["Type"] for x in transforms] == ["LOWERCASE", "COMPRESS_WHITE_SPACE"]
    scope = statement["ScopeDownStatement"]["ByteMatchStatement"]
    assert scope["FieldToMatch"] == {"UriPath": {}}
    # a trailing or doubled slash, or a percent-encoded letter, is still the query route
    # (the project's own model of API Gateway routes them there: grandbo.api.edge), so the
    # path is decoded and normalized, then contained, not ended with
    assert scope["PositionalConstraint"] == "CONTAINS"
    steps = sorted(scope["TextTransformations"], key=lambda x: x["Priority"])
    assert [x["Type"] for x in steps] == ["URL_DECODE", "NORMALIZE_PATH"]
    assert scope["SearchString"] == QUERY_PATH == "/v1/memory/query"
    from grandbo.api.edge import ROUTES

    # no other route's path holds the query route's
    assert [r.resource for r in ROUTES if QUERY_PATH in r.resource] == [QUERY_PATH]
    assert statement["EvaluationWindowSec"] in (60, 120, 300, 600)
    per_minute = statement["Limit"] * 60 / statement["EvaluationWindowSec"]
    assert per_minute >= 2 * MAX_QUERY_RATE_PER_MINUTE
    assert statement["Limit"] >= 10
    response = rule["Action"]["Block"]["CustomResponse"]
    assert response["ResponseCode"] == TOKEN_RATE_LIMITED.status == 429
    assert response["ResponseHeaders"] == [{"Name": "Retry-After", "Value": "60"}]
    # its own words: not "from this address"
    body = acl["CustomResponseBodies"][response["CustomResponseBodyKey"]]
    assert json.loads(body["Content"])["message"] == TOKEN_RATE_LIMITED.message
    assert "address" not in TOKEN_RATE_LIMITED.message
    # and every 429 the WAF answers says when to come back
    for blocking in acl["Rules"]:
        custom = blocking.get("Action", {}).get("Block", {}).get("CustomResponse", {})
        if custom.get("ResponseCode") == 429:
            (header,) = custom["ResponseHeaders"]
            assert header["Name"] == "Retry-After"
            assert int(header["Value"]) >= 1
    priorities = [r["Priority"] for r in _acl(t)["Rules"]]
    assert len(priorities) == len(set(priorities))
