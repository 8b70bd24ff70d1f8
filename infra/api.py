"""API Gateway REST API: the query routes behind the tenant authorizer, the signed admin routes."""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import Aws, Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from grandbo.api.edge import GATEWAY_RESPONSES, ROUTES
from grandbo.api.gateway_schema import gateway_schema
from infra.checkov import LOG_GROUP_KMS, skip_checks
from infra.config import StageConfig
from infra.waf import EdgeFirewall

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


# how each kind of route is authorized at the edge: the tenant authorizer (token); none,
# the function verifying the HMAC over the body (signed); AWS's own signature, SigV4,
# checked by API Gateway before the function runs (iam: people of IAM Identity Center)
_AUTHORIZATION: dict[str, apigw.AuthorizationType | None] = {
    "token": None,  # the authorizer's own type (CUSTOM)
    "signed": apigw.AuthorizationType.NONE,
    "iam": apigw.AuthorizationType.IAM,
}


# what ANY stands for in a request's ARN (each request names its own method)
_ANY_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


def _wildcard_path(resource: str) -> str:
    """A route's path with each path parameter (`{entry_id}`, `{proxy+}`) as `*`."""
    return re.sub(r"\{[^}]+\}", "*", resource)


def execute_api_resources(stage: str, method: str, resource: str) -> list[str]:
    """A route as a resource policy names it, `execute-api:/<stage>/<METHOD>/<path>`, its
    path parameters as wildcards. The stage and the method are spelt out: IAM's `*` also
    matches `/`, so `/*/*/v1/admin/*` would match `/prod/GET/v1/iam/admin/x/v1/admin/y`."""
    path = _wildcard_path(resource)
    methods = _ANY_METHODS if method == "ANY" else (method,)
    return [f"execute-api:/{stage}/{verb}{path}" for verb in methods]


def resource_policy(stage: str) -> iam.PolicyDocument:
    """Who may reach which route, before any authorizer runs.

    - Every route but the /v1/iam ones is open to any caller: the tenant authorizer or
      the function's HMAC check decides. With a resource policy, a route of no
      authorization type needs its explicit allow, and one behind a Lambda authorizer
      passes an allowing authorizer unless the policy denies it
      (https://docs.aws.amazon.com/apigateway/latest/developerguide/apigateway-authorization-flow.html).
    - The /v1/iam routes get no allow here, so a caller of the stack's account still
      needs execute-api:Invoke from their own permissions (a permission set's policy);
      and they are denied to every principal but IAM Identity Center's roles, which live
      under the path `aws-reserved/sso.amazonaws.com/` (their ARN,
      https://docs.aws.amazon.com/singlesignon/latest/userguide/referencingpermissionsets.html;
      aws:PrincipalArn "for IAM roles ... returns the ARN of the role",
      https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html):
      a role someone made and named like one (`AWSReservedSSO_<set>_<suffix>` at path
      `/`) is refused before the function reads its name.
    """
    open_routes = sorted(
        {
            arn
            for r in ROUTES
            if r.auth != "iam"
            for arn in execute_api_resources(stage, r.method, r.resource)
        }
    )
    # denied on every stage and method (a wider deny leaves nothing open)
    iam_routes = sorted(
        {"execute-api:/*/*" + _wildcard_path(r.resource) for r in ROUTES if r.auth == "iam"}
    )
    sso_roles = f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/aws-reserved/sso.amazonaws.com/*"
    return iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(
                sid="AuthorizedByTheRouteItself",
                principals=[iam.AnyPrincipal()],
                actions=["execute-api:Invoke"],
                resources=open_routes,
            ),
            iam.PolicyStatement(
                sid="PeopleOfIdentityCenterOnly",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["execute-api:Invoke"],
                resources=iam_routes,
                conditions={"ArnNotLike": {"aws:PrincipalArn": sso_roles}},
            ),
        ]
    )


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
            policy=resource_policy(stage.name),
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
        integrations = {
            "query": apigw.LambdaIntegration(query_function),
            "admin": apigw.LambdaIntegration(admin_function),
        }
        # every route, its guard and its models from grandbo.api.edge, which the local
        # gateway enforces too
        for route in ROUTES:
            request_models = None
            if route.body is not None:
                model = self.api.add_model(
                    route.body.__name__,
                    content_type="application/json",
                    schema=cdk_json_schema(gateway_schema(route.body)),
                )
                request_models = {"application/json": model}
            parameters = {
                f"method.request.path.{name}": True
                for name in route.path_parameters
                if f"{{{name}+}}" not in route.resource  # a greedy path is never empty
            } | {f"method.request.querystring.{name}": True for name in route.query_parameters}
            method = self._resource(route.resource).add_method(
                route.method,
                integrations[route.function],
                # signed routes: the HMAC covers the body, which a REQUEST authorizer never
                # sees, so the admin function verifies the signature before anything else
                authorizer=authorizer if route.auth == "token" else None,
                authorization_type=_AUTHORIZATION[route.auth],
                request_validator=validator,
                request_parameters=parameters or None,
                request_models=request_models,
            )
            if route.auth == "signed":
                skip_checks(
                    method,
                    (
                        "CKV_AWS_59",
                        "authenticated by the HMAC signature over the body, in the function",
                    ),
                )
        # API Gateway's own refusals answer with the edge's documents (grandbo.api.edge)
        for response_type, refusal in GATEWAY_RESPONSES.items():
            self.api.add_gateway_response(
                f"{response_type.title().replace('_', '')}Response",
                type=apigw.ResponseType.of(response_type),
                status_code=str(refusal.status),
                templates={"application/json": refusal.body()},
            )
        skip_checks(
            self.api.deployment_stage,
            (
                "CKV_AWS_120",
                "answers are per caller and tenant: a cache keyed without the token would "
                "serve one organization's memory to another",
            ),
        )
        self.firewall = EdgeFirewall(
            self, "Firewall", stage_arn=self.api.deployment_stage.stage_arn, stage=stage
        )
        self.web_acl = self.firewall.web_acl
        # what a permission set's policy grants its people: execute-api:Invoke on these
        self.iam_admin_arn = self.api.arn_for_execute_api("*", "/v1/iam/admin/*", stage.name)

    def _resource(self, path: str) -> apigw.IResource:
        resource: apigw.IResource = self.api.root
        for part in path.strip("/").split("/"):
            resource = resource.get_resource(part) or resource.add_resource(part)
        return resource
