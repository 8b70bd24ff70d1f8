"""A demo organization's memory: realistic findings from past incidents, written idempotently."""

from __future__ import annotations

from grandbo.memory.domain.idempotency import KeySpace, idempotency_key
from grandbo.memory.domain.models import NewEntry, Origin, WriteContext
from grandbo.memory.service import MemoryService
from grandbo.topology.model import service_dependencies
from grandbo.topology.service import TopologyService

DEMO_TENANT = "demo"

DEMO_TOPIC = (
    "checkout requests are timing out and the payment service logs show it cannot get a "
    "database connection since the afternoon deploy"
)

DEMO_ENTRIES: list[dict[str, str]] = [
    {
        "incident_id": "INC-1042",
        "service": "checkout-api",
        "title": "PgBouncer pool exhausted after worker count increase",
        "summary": "A deploy doubled gunicorn workers on checkout-api without raising the "
        "PgBouncer default_pool_size. Each worker held a server connection during slow "
        "inventory calls, the pool saturated and requests queued until the 30s client "
        "timeout. Fixed by sizing the pool to workers x 2 and adding a pool-wait alarm.",
    },
    {
        "incident_id": "INC-0977",
        "service": "payments",
        "title": "Long-running migration held row locks on the payments table",
        "summary": "An online migration added a NOT NULL column with a default inside one "
        "transaction. It held locks on payments for 11 minutes; payment writes blocked, "
        "connections piled up waiting and the service ran out of database connections. "
        "Migrations now run in batches with lock_timeout set.",
    },
    {
        "incident_id": "INC-1101",
        "service": "coredns",
        "title": "CoreDNS CPU throttling caused intermittent resolution timeouts",
        "summary": "CoreDNS pods had a 100m CPU limit; a traffic peak throttled them and "
        "DNS lookups from every namespace intermittently timed out after 5s (ndots:5 "
        "multiplied queries). Raised limits, enabled NodeLocal DNSCache, set ndots:2.",
    },
    {
        "incident_id": "INC-0899",
        "service": "search-api",
        "title": "JVM old-gen exhaustion after cache TTL change",
        "summary": "Raising the query cache TTL from 5 to 60 minutes grew the heap's old "
        "generation until full GCs ran back to back; search-api p99 rose to 12s and pods "
        "were OOMKilled. Rolled back the TTL and bounded the cache by entry count.",
    },
    {
        "incident_id": "INC-1120",
        "service": "edge-proxy",
        "title": "Expired intermediate certificate broke TLS for older clients",
        "summary": "The edge-proxy bundle still served an intermediate certificate that "
        "expired; Android 7 clients failed the TLS handshake while newer clients built an "
        "alternate chain. Now the chain is checked by a synthetic probe 30 days ahead.",
    },
    {
        "incident_id": "INC-1003",
        "service": "orders-worker",
        "title": "SQS visibility timeout shorter than processing time caused duplicates",
        "summary": "orders-worker took up to 90s per message under load while the queue "
        "visibility timeout was 30s, so messages reappeared and were processed twice, "
        "double-charging a handful of orders. Visibility timeout set to 6x the worst case "
        "and handlers made idempotent on order id.",
    },
    {
        "incident_id": "INC-1077",
        "service": "checkout-api",
        "title": "Feature flag rollout sent all traffic to an unscaled pricing backend",
        "summary": "A flag meant for 5% of users was set to 100%; checkout-api called the "
        "new pricing-v2 backend for every cart, which had two replicas and no autoscaling. "
        "Latency and 503s rose within minutes. Flags now require a staged rollout plan.",
    },
    {
        "incident_id": "INC-0950",
        "service": "redis-sessions",
        "title": "Redis eviction of session keys logged users out",
        "summary": "redis-sessions reached maxmemory with policy allkeys-lru; a batch job "
        "writing large keys evicted session keys and users were logged out. Sessions moved "
        "to a dedicated instance with noeviction and memory alarms at 80%.",
    },
    {
        "incident_id": "INC-1150",
        "service": "payments",
        "title": "Connection leak in payments retry path exhausted the RDS connection limit",
        "summary": "On a provider timeout the payments retry path opened a new database "
        "connection without closing the previous one. After a provider brownout the RDS "
        "instance hit max_connections and every service sharing it failed to connect. Fixed "
        "the leak and put RDS Proxy in front of the instance.",
    },
    {
        "incident_id": "INC-1013",
        "service": "kafka",
        "title": "Consumer lag from a rebalance storm after broker upgrade",
        "summary": "A rolling broker upgrade triggered repeated consumer group rebalances "
        "because session.timeout.ms was below the time a slow batch took; consumers never "
        "stabilised and lag grew to hours. Enabled cooperative rebalancing and raised "
        "max.poll.interval.ms.",
    },
]


# checkout-api -> payments -> postgres-main, checkout-api -> inventory -> postgres-main,
# payments -> redis-sessions, search-api -> kafka: `scope` and blast radius have a graph.
DEMO_DEPENDENCIES = [
    ("checkout-api", "payments"),
    ("checkout-api", "inventory"),
    ("payments", "postgres-main"),
    ("inventory", "postgres-main"),
    ("payments", "redis-sessions"),
    ("search-api", "kafka"),
    ("orders-worker", "payments"),
]


def seed_demo(service: MemoryService, tenant_id: str) -> int:
    """Write the demo entries (idempotent: a second run creates nothing); return new count."""
    created = 0
    for item in DEMO_ENTRIES:
        entry = NewEntry(
            title=item["title"],
            summary=item["summary"],
            service=item["service"],
            origin=Origin.INCIDENT,
            incident_id=item["incident_id"],
        )
        outcome = service.record_entry(
            tenant_id,
            entry,
            WriteContext(
                actor="grandbo-demo",
                idempotency_key=idempotency_key(KeySpace.DEMO, item["incident_id"]),
            ),
        )
        created += outcome.applied
    if isinstance(service.topology, TopologyService):
        service.topology.record(tenant_id, service_dependencies(DEMO_DEPENDENCIES), sync=True)
    return created


def seed_demo_once(service: MemoryService) -> int | None:
    """The demo organization seeded on a lake that has none (a new data directory), else
    left as the user left it: a restart of `grandbo serve` or `grandbo console` changes
    nothing the user wrote (before, each start re-synced the demo topology, closing the
    nodes the user had loaded). None when it was there already; `grandbo demo` seeds it
    when asked. A seeding a Ctrl-C cut short (the organization there, its entries or its
    topology not all written) is finished: `seed_demo` writes nothing twice."""
    if DEMO_TENANT in service.repository.tenant_ids() and _whole(service):
        return None
    return seed_demo(service, DEMO_TENANT)


def _whole(service: MemoryService) -> bool:
    """Whether the demo's seeding ran to its end: every entry written (entries are never
    deleted but by a purge) and, with a topology, its graph (written last)."""
    rows = service.repository.organization_rows(DEMO_TENANT)
    if rows.get("org_memory_entries", 0) < len(DEMO_ENTRIES):
        return False
    return not isinstance(service.topology, TopologyService) or rows.get("topology_nodes", 0) > 0
