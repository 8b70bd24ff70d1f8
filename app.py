#!/usr/bin/env python3
"""The CDK app: `cdk synth -c stage=dev` (or prod). cdk-nag AwsSolutions checks run on synth."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from infra.config import stage_config
from infra.stack import GrandboStack


def build_app(app: cdk.App | None = None) -> tuple[cdk.App, GrandboStack]:
    app = app or cdk.App()
    stage = stage_config(app.node.try_get_context("stage") or "dev")
    stack = GrandboStack(
        app,
        f"Grandbo-{stage.name}",
        stage=stage,
        description=f"Grandbo institutional memory ({stage.name})",
    )
    # DBProxyTargetGroup takes no tags in CloudFormation
    untaggable = ["AWS::RDS::DBProxyTargetGroup"]
    cdk.Tags.of(stack).add("service", "grandbo", exclude_resource_types=untaggable)
    cdk.Tags.of(stack).add("stage", stage.name, exclude_resource_types=untaggable)
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stack


if __name__ == "__main__":
    built, _ = build_app()
    built.synth()
