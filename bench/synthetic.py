"""Synthetic organizations with realistic incident text, for the benchmarks only.

Text comes from templates over real-world services, symptoms, mechanisms and fixes. A
pool of distinct texts is embedded with the real local model; each entry takes a pool
text's vector plus a little Gaussian noise (renormalized), so the vector space has the
clustered shape of real incident memory without embedding 500,000 texts.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

SERVICES = [
    "checkout-api",
    "payments",
    "inventory",
    "search-api",
    "orders-worker",
    "auth-service",
    "edge-proxy",
    "postgres-main",
    "redis-sessions",
    "kafka",
    "notifications",
    "billing",
    "catalog",
    "recommendations",
    "shipping",
    "user-profile",
    "gateway",
    "reporting",
    "ledger",
    "fraud-detection",
    "media-upload",
    "analytics-ingest",
    "coredns",
    "vault",
]
SYMPTOMS = [
    "p99 latency rose above 8 seconds",
    "requests failed with HTTP 503",
    "pods were OOMKilled and restarted in a loop",
    "consumer lag grew for hours",
    "connections timed out waiting for the pool",
    "error rate reached 40 percent",
    "TLS handshakes failed for older clients",
    "DNS lookups timed out intermittently",
    "disk usage reached 100 percent",
    "CPU throttling saturated the nodes",
    "the queue backlog kept growing",
    "users were logged out unexpectedly",
    "writes were rejected as read-only",
    "health checks flapped across the fleet",
]
MECHANISMS = [
    "the connection pool was sized for half the workers",
    "a retry storm amplified a brief upstream brownout",
    "a schema migration held locks on a hot table",
    "an expired intermediate certificate stayed in the bundle",
    "a feature flag sent all traffic to an unscaled backend",
    "the cache TTL change grew the heap until full GCs ran back to back",
    "replication lag let WAL accumulate until the volume filled",
    "the visibility timeout was shorter than the processing time",
    "a noisy neighbour exhausted IOPS on the shared volume",
    "a config push removed the rate limit on an internal endpoint",
    "an autoscaling policy scaled in during peak traffic",
    "a dependency upgrade changed the default timeout to infinite",
]
FIXES = [
    "Raised the pool size and added a pool-wait alarm.",
    "Added jittered backoff and a circuit breaker.",
    "Moved migrations to batched, lock_timeout-guarded steps.",
    "Added a synthetic probe for certificate expiry 30 days ahead.",
    "Required staged rollouts for flags on critical paths.",
    "Bounded the cache by entry count and rolled back the TTL.",
    "Alarmed on replication slot lag and removed the dead replica.",
    "Set the visibility timeout to six times the worst case.",
    "Moved the volume to provisioned IOPS.",
    "Restored the rate limit and added a config review check.",
]


@dataclass(frozen=True, slots=True)
class SyntheticEntry:
    entry_id: uuid.UUID
    service: str
    title: str
    summary: str


def incident_text(rng: random.Random) -> tuple[str, str, str]:
    service = rng.choice(SERVICES)
    symptom, mechanism, fix = rng.choice(SYMPTOMS), rng.choice(MECHANISMS), rng.choice(FIXES)
    title = f"{service}: {symptom}"
    summary = f"On {service}, {symptom} because {mechanism}. {fix}"
    return service, title, summary


def topic_text(rng: random.Random) -> str:
    service = rng.choice(SERVICES)
    return f"{rng.choice(SYMPTOMS)} on {service}; we suspect {rng.choice(MECHANISMS)}"


def pool(size: int, seed: int = 1) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    seen: dict[str, tuple[str, str, str]] = {}
    while len(seen) < size:
        item = incident_text(rng)
        seen.setdefault(item[2], item)
    return list(seen.values())


def noisy(base: np.ndarray, rng: np.random.Generator, sigma: float = 0.04) -> np.ndarray:
    """Pool vectors plus noise on the model's 384 dimensions, renormalized, zero-padded."""
    out = np.zeros((len(base), 1024), dtype=np.float32)
    jitter = base[:, :384] + rng.normal(0, sigma, size=(len(base), 384)).astype(np.float32)
    out[:, :384] = jitter / np.linalg.norm(jitter, axis=1, keepdims=True)
    return out


def organization(
    count: int, texts: list[tuple[str, str, str]], vectors: np.ndarray, seed: int
) -> Iterator[tuple[SyntheticEntry, np.ndarray]]:
    """`count` entries drawn from the pool, each with its own noisy vector."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(texts), size=count)
    batch = 10_000
    for start in range(0, count, batch):
        idx = picks[start : start + batch]
        vecs = noisy(vectors[idx], rng)
        for i, vector in zip(idx, vecs, strict=True):
            service, title, summary = texts[int(i)]
            yield SyntheticEntry(uuid.uuid4(), service, title, summary), vector
