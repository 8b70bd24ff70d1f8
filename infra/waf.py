"""The stage's WAF: AWS's Core rule set and known-bad inputs, a per-address rate limit
derived from the stage's API throttle, a per-token one on the query route above every
organization's rate, and the API's body limit; every block Grandbo
defines answers with the edge's own document (`grandbo.api.edge`).

Rule by rule, what blocks and what only counts, and why:
https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html
"""

from __future__ import annotations

import hashlib
from typing import Any

from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from grandbo.api.edge import (
    BODY_TOO_LARGE,
    NO_USER_AGENT,
    QUERY_PATH,
    RATE_LIMITED,
    TOKEN_RATE_LIMITED,
    Refusal,
)
from grandbo.api.models import MAX_BODY_BYTES
from grandbo.memory.service import MAX_QUERY_RATE_PER_MINUTE
from infra.config import WAF_RATE_WINDOW_S, StageConfig

CORE_RULE_SET = "AWSManagedRulesCommonRuleSet"
KNOWN_BAD_INPUTS = "AWSManagedRulesKnownBadInputsRuleSet"
# Core rule set rules that inspect the body, counted instead of blocked on every route.
# Every body Grandbo takes is incident text (a topic, a finding, a correction) or JSON
# settings, and post-mortems quote exactly what these look for; the API answers JSON
# only, never renders a body as HTML, never fetches a URL or opens a path it was sent.
COUNTED_BODY_RULES: dict[str, str] = {
    "SizeRestrictions_BODY": "its 8 KB cap would block admin writes and topology batches "
    "the API accepts; the API's own limit is the BodyOverApiLimit rule",
    "GenericRFI_BODY": "findings quote URLs with IP addresses (a health check against "
    "http://10.0.3.7:8080/healthz); the service never fetches a URL it is sent",
    "GenericLFI_BODY": "findings quote relative paths (../../etc/nginx/nginx.conf); the "
    "service never opens a path it is sent",
    "EC2MetaDataSSRF_BODY": "findings quote the instance metadata endpoint "
    "(169.254.169.254/latest/meta-data/) when credentials or IMDS failed; never fetched",
    "CrossSiteScripting_BODY": "findings quote HTML error pages and markup; the API "
    "answers application/json only, so no body is ever rendered by a browser from it",
}
# Known bad inputs rules that read the body, counted too: a post-mortem of Log4Shell
# quotes its `${jndi:ldap://...}` lookup, and a Java incident its deserialization stack
# trace. Grandbo runs no Java and no Log4j; the header, path and query-string variants of
# the same rules (where such a string is an attack, not a quotation) keep blocking.
COUNTED_KNOWN_BAD_BODY_RULES: dict[str, str] = {
    "Log4JRCE_BODY": "post-mortems of Log4Shell quote the JNDI lookup they were attacked "
    "with; nothing here runs Log4j",
    "JavaDeserializationRCE_BODY": "Java incidents quote deserialization stack traces; "
    "nothing here deserializes Java",
}
# NoUserAgent_HEADER stays a block (every Grandbo client names itself), with the edge's
# document in place of WAF's bare 403
NO_USER_AGENT_RULE = "NoUserAgent_HEADER"


def waf_rate_limit(stage: StageConfig) -> int:
    """Requests per address per window: the stage's whole API throttle, since Grandbo's
    callers are services behind one NAT address (and a recall hook on every model call),
    so one address may legitimately use all of it; API Gateway's throttle still caps it."""
    return stage.api_rate_limit * WAF_RATE_WINDOW_S


# Questions per token, at the edge: the rate-based rule counts each distinct Authorization
# header on the query route only (a scope-down statement: entry reads, feedback and the
# topology are not questions), lowercased with its spaces compressed (so `bearer`, or
# extra spaces, are one counter with the canonical spelling; the authorizer refuses any
# other variant), over WAF's shortest window. The application holds each caller to its
# organization's rate (grandbo.runtime.admission: counted per process); the edge is the
# shared backstop across processes, with headroom over the highest rate an organization
# can set, so a caller within its organization's rate never meets the edge's approximate
# count. A request without the header is not counted by this rule (AWS: "Web requests that
# are missing any of the components specified in the aggregation keys are omitted"); the
# authorizer refuses it anyway.
TOKEN_RATE_WINDOW_S = 60
TOKEN_RATE_HEADROOM = 2


def waf_token_limit() -> int:
    """Questions per Authorization header per TOKEN_RATE_WINDOW_S: twice the highest rate
    an organization can set (`MAX_QUERY_RATE_PER_MINUTE`)."""
    return MAX_QUERY_RATE_PER_MINUTE * TOKEN_RATE_HEADROOM * TOKEN_RATE_WINDOW_S // 60


def _body_key(refusal: Refusal) -> str:
    """The custom body's key: its error and status, and its message's digest (two
    refusals of one status differ by their words)."""
    digest = hashlib.sha256(refusal.message.encode()).hexdigest()[:8]
    return refusal.error.replace("_", "-") + f"-{refusal.status}-{digest}"


def _block(
    refusal: Refusal, retry_after_s: int | None = None
) -> wafv2.CfnWebACL.RuleActionProperty:
    """A block answering the edge's document (and, for a rate, when to come back: the
    Retry-After the clients and the recall hook honour)."""
    headers = (
        None
        if retry_after_s is None
        else [
            wafv2.CfnWebACL.CustomHTTPHeaderProperty(name="Retry-After", value=str(retry_after_s))
        ]
    )
    return wafv2.CfnWebACL.RuleActionProperty(
        block=wafv2.CfnWebACL.BlockActionProperty(
            custom_response=wafv2.CfnWebACL.CustomResponseProperty(
                response_code=refusal.status,
                custom_response_body_key=_body_key(refusal),
                response_headers=headers,
            )
        )
    )


def _counted(rules: dict[str, str]) -> list[wafv2.CfnWebACL.RuleActionOverrideProperty]:
    return [
        wafv2.CfnWebACL.RuleActionOverrideProperty(
            name=rule, action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={})
        )
        for rule in rules
    ]


def _visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
    )


def _managed(
    name: str, priority: int, metric: str, overrides: list[Any]
) -> wafv2.CfnWebACL.RuleProperty:
    return wafv2.CfnWebACL.RuleProperty(
        name=name,
        priority=priority,
        override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
        statement=wafv2.CfnWebACL.StatementProperty(
            managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                vendor_name="AWS", name=name, rule_action_overrides=overrides or None
            )
        ),
        visibility_config=_visibility(metric),
    )


def _query_route() -> wafv2.CfnWebACL.StatementProperty:
    """Requests to the query route, whatever the stage prefix and however its path is
    spelled (percent-encoded, doubled or trailing slashes: decoded and normalized before
    the match, and contained rather than ended with)."""
    return wafv2.CfnWebACL.StatementProperty(
        byte_match_statement=wafv2.CfnWebACL.ByteMatchStatementProperty(
            field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(uri_path={}),
            positional_constraint="CONTAINS",
            search_string=QUERY_PATH,
            text_transformations=[
                wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="URL_DECODE"),
                wafv2.CfnWebACL.TextTransformationProperty(priority=1, type="NORMALIZE_PATH"),
            ],
        )
    )


class EdgeFirewall(Construct):
    """A regional web ACL associated with the API's stage."""

    def __init__(
        self, scope: Construct, construct_id: str, *, stage_arn: str, stage: StageConfig
    ) -> None:
        super().__init__(scope, construct_id)
        counted = _counted(COUNTED_BODY_RULES)
        named = wafv2.CfnWebACL.RuleActionOverrideProperty(
            name=NO_USER_AGENT_RULE, action_to_use=_block(NO_USER_AGENT)
        )
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            # WAF reads up to 64 KB of an API Gateway body (the API's own limit), so the
            # size rule sees whole bodies; a larger one counts as over the limit
            association_config=wafv2.CfnWebACL.AssociationConfigProperty(
                request_body={
                    "API_GATEWAY": wafv2.CfnWebACL.RequestBodyAssociatedResourceTypeConfigProperty(
                        default_size_inspection_limit="KB_64"
                    )
                }
            ),
            custom_response_bodies={
                _body_key(refusal): wafv2.CfnWebACL.CustomResponseBodyProperty(
                    content=refusal.body(), content_type="APPLICATION_JSON"
                )
                for refusal in (NO_USER_AGENT, BODY_TOO_LARGE, RATE_LIMITED, TOKEN_RATE_LIMITED)
            },
            visibility_config=_visibility(f"grandbo-{stage.name}-api"),
            rules=[
                _managed(CORE_RULE_SET, 0, "common-rules", [named, *counted]),
                wafv2.CfnWebACL.RuleProperty(
                    name="RatePerIp",
                    priority=1,
                    action=_block(RATE_LIMITED, retry_after_s=WAF_RATE_WINDOW_S),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            limit=waf_rate_limit(stage),
                            aggregate_key_type="IP",
                            evaluation_window_sec=WAF_RATE_WINDOW_S,
                        )
                    ),
                    visibility_config=_visibility("rate-per-ip"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    name="RatePerToken",
                    priority=4,
                    action=_block(TOKEN_RATE_LIMITED, retry_after_s=TOKEN_RATE_WINDOW_S),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            limit=waf_token_limit(),
                            aggregate_key_type="CUSTOM_KEYS",
                            custom_keys=[
                                wafv2.CfnWebACL.RateBasedStatementCustomKeyProperty(
                                    header=wafv2.CfnWebACL.RateLimitHeaderProperty(
                                        name="authorization",
                                        text_transformations=[
                                            wafv2.CfnWebACL.TextTransformationProperty(
                                                priority=0, type="LOWERCASE"
                                            ),
                                            wafv2.CfnWebACL.TextTransformationProperty(
                                                priority=1, type="COMPRESS_WHITE_SPACE"
                                            ),
                                        ],
                                    )
                                )
                            ],
                            evaluation_window_sec=TOKEN_RATE_WINDOW_S,
                            scope_down_statement=_query_route(),
                        )
                    ),
                    visibility_config=_visibility("rate-per-token"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    name="BodyOverApiLimit",
                    priority=2,
                    action=_block(BODY_TOO_LARGE),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        size_constraint_statement=wafv2.CfnWebACL.SizeConstraintStatementProperty(
                            comparison_operator="GT",
                            size=MAX_BODY_BYTES,
                            field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(
                                body=wafv2.CfnWebACL.BodyProperty(oversize_handling="MATCH")
                            ),
                            text_transformations=[
                                wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
                            ],
                        )
                    ),
                    visibility_config=_visibility("body-over-api-limit"),
                ),
                # request patterns known to be malicious (Log4Shell's JNDI lookups among
                # them), blocked
                _managed(
                    KNOWN_BAD_INPUTS,
                    3,
                    "known-bad-inputs",
                    _counted(COUNTED_KNOWN_BAD_BODY_RULES),
                ),
            ],
        )
        wafv2.CfnWebACLAssociation(
            self, "WebAclAssociation", resource_arn=stage_arn, web_acl_arn=self.web_acl.attr_arn
        )
