"""checkov findings skipped on purpose, each on its own resource with its reason.

checkov reads `Metadata.checkov.skip` of a CloudFormation resource; `make lint-infra`
runs it on both stages' templates and fails on any finding neither fixed nor skipped here.
"""

from __future__ import annotations

from aws_cdk import CfnResource
from constructs import IConstruct

# The same reason, written once, for findings that repeat on every resource of a kind.
LOG_GROUP_KMS = (
    "CKV_AWS_158",
    "CloudWatch Logs encrypts at rest by default; logs hold ids and counts, never memory "
    "text, and IAM alone decides who reads them",
)
ENV_KMS = (
    "CKV_AWS_173",
    "the environment holds ARNs, names and flags, no secret (secrets come from Secrets "
    "Manager at run time); Lambda encrypts it at rest with its AWS-managed key",
)
SECRET_CMK = (
    "CKV_AWS_149",
    "encrypted with the aws/secretsmanager key; each function is granted read on its own "
    "secrets by IAM, which a customer key would not narrow",
)
NOT_IN_VPC = (
    "CKV_AWS_117",
    "touches no database: it calls AWS APIs only, through their public endpoints",
)
UNCAPPED = (
    "CKV_AWS_115",
    "deploy-time only, one invocation per deploy: a reserved cap would only take from the "
    "account's pool",
)


def skip_checks(construct: IConstruct, *checks: tuple[str, str]) -> None:
    """Skip (check id, reason) pairs on the construct's CloudFormation resource."""
    resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
    if not isinstance(resource, CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to annotate")
    existing = resource.get_metadata("checkov") or {"skip": []}
    skips = list(existing["skip"])
    known = {skip["id"] for skip in skips}
    skips += [{"id": check, "comment": reason} for check, reason in checks if check not in known]
    resource.add_metadata("checkov", {"skip": skips})
