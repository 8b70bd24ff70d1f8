"""What the synthesized stack's edge does with a request, read from the template alone.

An interpreter of the template's WAF rules, API Gateway resources, methods, validators,
models and gateway responses, written apart from `grandbo.api.edge` (which both the stack
and the local gateway are built from), so that a test can hold the local gateway's answers
against what AWS would answer for the same request (issue 23, item 4). It models only
what Grandbo's template uses; each rule says where AWS documents the behaviour.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft4Validator

Answer = tuple[int, dict[str, Any]]


@dataclass(frozen=True)
class _Method:
    http_method: str
    segments: tuple[str, ...]
    custom_auth: bool
    required_query: tuple[str, ...]
    model: Draft4Validator | None


def _resource_paths(resources: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    paths: dict[str, tuple[str, ...]] = {}

    def path_of(logical_id: str) -> tuple[str, ...]:
        if logical_id not in paths:
            props = resources[logical_id]["Properties"]
            parent = props["ParentId"]
            above = path_of(parent["Ref"]) if "Ref" in parent else ()
            paths[logical_id] = (*above, props["PathPart"])
        return paths[logical_id]

    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::ApiGateway::Resource":
            path_of(logical_id)
    return paths


def _matches(segments: tuple[str, ...], parts: list[str]) -> bool:
    for index, segment in enumerate(segments):
        if segment.startswith("{") and segment.endswith("+}"):
            return len(parts) > index
        if index >= len(parts):
            return False
        if not (segment.startswith("{") or parts[index] == segment):
            return False
    return len(parts) == len(segments)


class DeployedEdge:
    def __init__(self, template: dict[str, Any]) -> None:
        resources = template["Resources"]
        paths = _resource_paths(resources)
        self.methods: list[_Method] = []
        for resource in resources.values():
            if resource["Type"] != "AWS::ApiGateway::Method":
                continue
            props = resource["Properties"]
            parent = props["ResourceId"]
            segments = paths[parent["Ref"]] if "Ref" in parent else ()
            parameters = props.get("RequestParameters", {})
            required = tuple(
                name.removeprefix("method.request.querystring.")
                for name, needed in parameters.items()
                if needed and name.startswith("method.request.querystring.")
            )
            model = None
            models = props.get("RequestModels", {})
            if "application/json" in models:
                schema = resources[models["application/json"]["Ref"]]["Properties"]["Schema"]
                model = Draft4Validator(schema)
            self.methods.append(
                _Method(
                    props["HttpMethod"],
                    segments,
                    props.get("AuthorizationType") == "CUSTOM",
                    required,
                    model,
                )
            )
        self.responses: dict[str, Answer] = {}
        for resource in resources.values():
            if resource["Type"] == "AWS::ApiGateway::GatewayResponse":
                props = resource["Properties"]
                document = json.loads(props["ResponseTemplates"]["application/json"])
                self.responses[props["ResponseType"]] = (int(props["StatusCode"]), document)
        (acl,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::WAFv2::WebACL"]
        bodies = {k: json.loads(v["Content"]) for k, v in acl["CustomResponseBodies"].items()}
        rules = {rule["Name"]: rule for rule in acl["Rules"]}
        core = rules["AWSManagedRulesCommonRuleSet"]["Statement"]["ManagedRuleGroupStatement"]
        (no_agent,) = [
            o["ActionToUse"]
            for o in core["RuleActionOverrides"]
            if o["Name"] == "NoUserAgent_HEADER"
        ]
        self.no_user_agent = self._custom(no_agent, bodies)
        size = rules["BodyOverApiLimit"]
        self.body_limit = int(size["Statement"]["SizeConstraintStatement"]["Size"])
        self.body_too_large = self._custom(size["Action"], bodies)

    @staticmethod
    def _custom(action: dict[str, Any], bodies: dict[str, Any]) -> Answer:
        response = action["Block"]["CustomResponse"]
        return int(response["ResponseCode"]), bodies[response["CustomResponseBodyKey"]]

    def answer(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
        *,
        token_valid: bool,
    ) -> Answer | None:
        """The edge's own answer, or None when the request reaches a function."""
        lowered = {k.lower(): v for k, v in headers.items()}
        # the WAF, by rule priority: the Core rule set (0: NoUserAgent_HEADER blocks a
        # request without the header:
        # https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html),
        # then the body size rule (2)
        if not lowered.get("user-agent", "").strip():
            return self.no_user_agent
        if len(body) > self.body_limit:
            return self.body_too_large
        # API Gateway: an unknown resource or method is MISSING_AUTHENTICATION_TOKEN
        # (https://docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html)
        parts = path.strip("/").split("/") if path.strip("/") else []
        candidates = [
            m
            for m in self.methods
            if m.http_method in (method, "ANY") and _matches(m.segments, parts)
        ]
        if not candidates:
            return self.responses["MISSING_AUTHENTICATION_TOKEN"]
        # a literal segment wins over a parameter (API Gateway picks the most specific)
        chosen = max(candidates, key=lambda m: sum(not s.startswith("{") for s in m.segments))
        # the authorizer before the request validator
        if chosen.custom_auth and not token_valid:
            return self.responses["UNAUTHORIZED"]
        if any(not query.get(name) for name in chosen.required_query):
            return self.responses["BAD_REQUEST_PARAMETERS"]
        content_type = lowered.get("content-type", "application/json")
        media_type = content_type.split(";")[0].strip().lower()
        if chosen.model is not None and media_type == "application/json":
            try:
                document = json.loads(body or b"{}")
            except ValueError:
                return self.responses["BAD_REQUEST_BODY"]
            if not chosen.model.is_valid(document):
                return self.responses["BAD_REQUEST_BODY"]
        return None
