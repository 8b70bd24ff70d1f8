"""Legitimate incident text shaped like what AWS's Core rule set body rules look for.

Post-mortems quote metadata endpoints, relative paths, HTML error pages and URLs with IP
addresses as a matter of course; each finding below is written the way such a
post-mortem sentence is (our own wording), labelled with the Core rule set rule its shape
exercises (rule names from
https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html).
The stack must not block these bodies (tests/infra/test_edge_firewall.py), and Grandbo
must store and find them (tests/e2e/test_edge_parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LegitimateFinding:
    rule: str
    title: str
    summary: str
    topic: str  # how an investigator would later ask for it


LEGITIMATE_FINDINGS = (
    LegitimateFinding(
        "EC2MetaDataSSRF_BODY",
        "Instance metadata throttled credential refresh",
        "Workers polled http://169.254.169.254/latest/meta-data/iam/security-credentials/ "
        "on every request; IMDS throttled them and S3 uploads failed with expired tokens.",
        "uploads failed because workers hammered the instance metadata service for credentials",
    ),
    LegitimateFinding(
        "GenericLFI_BODY",
        "Config reload read a stale nginx include",
        "The reload script resolved ../../etc/nginx/nginx.conf relative to the release "
        "folder, loaded the previous upstream list and sent traffic to drained hosts.",
        "nginx reload sent traffic to drained upstream hosts from an old configuration file",
    ),
    LegitimateFinding(
        "GenericRFI_BODY",
        "Health check pointed at a decommissioned address",
        "The load balancer probed http://10.0.3.7:8080/healthz?target=http://10.0.9.12/status "
        "after the host was replaced, marked the pool unhealthy and shed all traffic.",
        "the load balancer marked the pool unhealthy because its health check hit an old address",
    ),
    LegitimateFinding(
        "CrossSiteScripting_BODY",
        "CDN served the origin's HTML error page as JSON",
        'Clients received <html><head><title>502 Bad Gateway</title></head><body onload="x()">'
        "<script>retry()</script></body></html> with a 200 status, and the mobile app "
        "crashed parsing it.",
        "the mobile app crashed parsing an HTML bad gateway page the CDN returned with 200",
    ),
)
