"""API Gateway REST API: the query routes behind the tenant authorizer, the signed admin routes."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from grandbo.api.gateway_schema import gateway_schema
from grandbo.api.models import MAX_BODY_BYTES, FeedbackRequest, QueryRequest
from infra.checkov import LOG_GROUP_KMS, skip_checks
from infra.config import StageConfig

_KEYWORDS = {
    "$schema": "schema",
    "additionalProperties": "additional_properties",
    "maxLength": "max_length",
    "minLength": "min_length",
    "maxItems": "max_items",
    "minItems": "min_items",
}


def cdk_json_schema(schema: dict[str, Any]) -> apigw.JsonSchema:
    """A generated draft-4 schema (`grandbo.api.gateway_schema`) as CDK's JsonSchema."""
    fields: dict[str, Any] = {}
    for key, value in schema.items():
        name = _KEYWORDS.get(key, key)
        if key == "$schema":
            value = apigw.JsonSchemaVersion.DRAFT4
        elif key == "type":
            value = (
                [apigw.JsonSchemaType(v.upper()) for v in value]
                if isinstance(value, list)
                else apigw.JsonSchemaType(value.upper())
            )
        elif key == "properties":
            value = {prop: cdk_json_schema(child) for prop, child in value.items()}
        elif key == "items":
            value = cdk_json_schema(value)
        elif key == "anyOf":
            name, value = "any_of", [cdk_json_schema(option) for option in value]
        fields[name] = value
    return apigw.JsonSchema(**fields)


# The query body's gateway model is generated from the handler's own pydantic model
QUERY_SCHEMA = cdk_json_schema(gateway_schema(QueryRequest))
FEEDBACK_SCHEMA = cdk_json_schema(gateway_schema(FeedbackRequest))


class MemoryApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        query_function: lambda_.Function,
        admin_function: lambda_.Function,
        authorizer_function: lambda_.Function,
        stage: StageConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(self, "AccessLogs", retention=logs.RetentionDays.THREE_MONTHS)
        skip_checks(access_logs, LOG_GROUP_KMS)
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name=f"grandbo-{stage.name}",
            description="Grandbo memory: query_org_memory and signed admin writes",
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=stage.name,
                throttling_rate_limit=stage.api_rate_limit,
                throttling_burst_limit=stage.api_burst_limit,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            ),
        )
        authorizer = apigw.RequestAuthorizer(
            self,
            "TenantAuthorizer",
            handler=authorizer_function,
            identity_sources=[apigw.IdentitySource.header("Authorization")],
            results_cache_ttl=Duration.minutes(5),
        )
        validator = apigw.RequestValidator(
            self,
            "BodyValidator",
            rest_api=self.api,
            validate_request_body=True,
            validate_request_parameters=True,
        )
        query_model = self.api.add_model(
            "QueryRequest", content_type="application/json", schema=QUERY_SCHEMA
        )
        query_integration = apigw.LambdaIntegration(query_function)
        memory = self.api.root.add_resource("v1").add_resource("memory")
        memory.add_resource("query").add_method(
            "POST",
            query_integration,
            authorizer=authorizer,
            request_validator=validator,
            request_models={"application/json": query_model},
        )
        entry = memory.add_resource("entries").add_resource("{entry_id}")
        entry.add_method(
            "GET",
            query_integration,
            authorizer=authorizer,
            request_validator=validator,
            request_parameters={"method.request.path.entry_id": True},
        )
        feedback_model = self.api.add_model(
            "FeedbackRequest", content_type="application/json", schema=FEEDBACK_SCHEMA
        )
        entry.add_resource("feedback").add_method(
            "POST",
            query_integration,
            authorizer=authorizer,
            request_validator=validator,
            request_parameters={"method.request.path.entry_id": True},
            request_models={"application/json": feedback_model},
        )
        topology = self.api.root.get_resource("v1")
        assert topology is not None
        graph = topology.add_resource("topology")
        for route in ("blast-radius", "criticality"):
            graph.add_resource(route).add_method(
                "GET",
                query_integration,
                authorizer=authorizer,
                request_validator=validator,
                request_parameters={
                    "method.request.querystring.type": True,
                    "method.request.querystring.id": True,
                },
            )
        # Admin requests are HMAC-signed over the body; a REQUEST authorizer never sees the
        # body, so the admin Lambda verifies the signature itself before anything else.
        admin = self.api.root.get_resource("v1")
        assert admin is not None
        admin_method = (
            admin.add_resource("admin")
            .add_resource("{proxy+}")
            .add_method(
                "ANY",
                apigw.LambdaIntegration(admin_function),
                authorization_type=apigw.AuthorizationType.NONE,
                request_validator=validator,
            )
        )
        skip_checks(
            admin_method,
            ("CKV_AWS_59", "authenticated by the HMAC signature over the body, in the function"),
        )
        skip_checks(
            self.api.deployment_stage,
            (
                "CKV_AWS_120",
                "answers are per caller and tenant: a cache keyed without the token would "
                "serve one organization's memory to another",
            ),
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
            visibility_config=_visibility("grandbo-api"),
            rules=[
                wafv2.CfnWebACL.RuleProperty(
                    name="AWSManagedRulesCommonRuleSet",
                    priority=0,
                    override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS",
                            name="AWSManagedRulesCommonRuleSet",
                            # its 8 KB body cap would block admin writes and topology
                            # batches the API accepts (64 KB): counted, not blocked; the
                            # API's own limit is the BodyOverApiLimit rule below
                            rule_action_overrides=[
                                wafv2.CfnWebACL.RuleActionOverrideProperty(
                                    name="SizeRestrictions_BODY",
                                    action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={}),
                                )
                            ],
                        )
                    ),
                    visibility_config=_visibility("common-rules"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    # request patterns known to be malicious (Log4Shell's JNDI lookups among
                    # them), blocked
                    name="AWSManagedRulesKnownBadInputsRuleSet",
                    priority=3,
                    override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS", name="AWSManagedRulesKnownBadInputsRuleSet"
                        )
                    ),
                    visibility_config=_visibility("known-bad-inputs"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    name="BodyOverApiLimit",
                    priority=2,
                    action=wafv2.CfnWebACL.RuleActionProperty(block={}),
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
                wafv2.CfnWebACL.RuleProperty(
                    name="RatePerIp",
                    priority=1,
                    action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            limit=2000, aggregate_key_type="IP"
                        )
                    ),
                    visibility_config=_visibility("rate-per-ip"),
                ),
            ],
        )
        wafv2.CfnWebACLAssociation(
            self,
            "WebAclAssociation",
            resource_arn=self.api.deployment_stage.stage_arn,
            web_acl_arn=self.web_acl.attr_arn,
        )


def _visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
    )
