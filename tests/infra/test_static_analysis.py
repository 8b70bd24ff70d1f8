"""What `make lint-infra` relies on: checkov skips sit on single resources, each with a
reason, and the findings that were fixed stay fixed."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("aws_cdk", reason="install the infra extra: pip install -e '.[infra]'")

# fixed, not skipped: no resource may skip these
FIXED = {"CKV_AWS_118", "CKV_AWS_192"}


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_every_checkov_skip_names_a_check_and_says_why(stage: str, dev: Any, prod: Any) -> None:
    _, template = dev if stage == "dev" else prod
    resources = template.to_json()["Resources"]
    skipped = {
        name: resource["Metadata"]["checkov"]["skip"]
        for name, resource in resources.items()
        if "checkov" in resource.get("Metadata", {})
    }
    assert len(skipped) >= 20
    for name, skips in skipped.items():
        ids = [skip["id"] for skip in skips]
        assert len(ids) == len(set(ids)), name
        for skip in skips:
            assert re.fullmatch(r"CKV_AWS_\d+", skip["id"]), (name, skip)
            assert len(skip["comment"]) >= 40, (name, skip)  # a reason, not a shrug
            assert skip["id"] not in FIXED, (name, skip)
    # the template itself carries no blanket skip
    assert "checkov" not in template.to_json().get("Metadata", {})


def test_the_fixed_findings_stay_fixed(dev: Any) -> None:
    _, template = dev
    instances = template.find_resources("AWS::RDS::DBInstance")
    assert instances
    assert all(i["Properties"]["MonitoringInterval"] == 60 for i in instances.values())
    (acl,) = template.find_resources("AWS::WAFv2::WebACL").values()
    groups = {
        rule["Statement"]["ManagedRuleGroupStatement"]["Name"]
        for rule in acl["Properties"]["Rules"]
        if "ManagedRuleGroupStatement" in rule["Statement"]
    }
    assert "AWSManagedRulesKnownBadInputsRuleSet" in groups  # Log4Shell's lookups blocked
