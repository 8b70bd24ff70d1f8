"""The vector cutoff from an organization's own lake, without labels.

A provider's cutoff (the distance under which an entry is a vector-leg candidate) is a
constant nobody measured for Titan, and a wrong one silently empties or floods the leg.
`calibrate` measures it where it matters: for a sample of the tenant's entries, the
distance from each entry's title (a short text, like a topic) to its own stored vector
(what a relevant entry looks like) and to another entry's vector (what an unrelated one
looks like). The cutoff is the distance that best separates the two (the largest
difference between the share of own pairs under it and of other pairs under it; in the
middle of the gap where it starts), kept per tenant and embedding revision, and used by
the tenant's queries instead of the provider's default.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from grandbo.embedding.base import EmbeddingProvider
from grandbo.errors import InvalidInputError
from grandbo.memory.domain.recalibration import Recalibration
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.calibration import QueryReads
from grandbo.memory.vectors.blue_green import BlueGreen
from grandbo.tenancy import require_tenant

MIN_CALIBRATION_SAMPLE = 20
# below this separation the titles say nothing about their entries (identical titles, a
# lake whose titles sit nearer other entries): nothing is stored, the default stays
MIN_SEPARATION = 0.5
# A calibrated cutoff may drop at most this share more of the sample's own titles from
# their entries than the cutoff in force does: past it, the vector leg would find nothing
# for queries it answers today (issue 24: 0.18 on a lake of look-alike titles, where a
# real topic's best match sat at 0.53)
MAX_OWN_PAIRS_LOST = 0.1
DEFAULT_CALIBRATION_SAMPLE = 100
MAX_CALIBRATION_SAMPLE = 1000
# a cutoff's reads are cached this long per service (a Lambda container): one indexed
# read per tenant every few minutes, not per query
CUTOFF_CACHE_S = 300.0


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    tenant_id: str
    embed_rev: str
    vector_cutoff: float
    provider_default: float
    sample_size: int
    own_p50: float
    own_p95: float
    other_p5: float
    other_p50: float
    separation: float  # share of own pairs under the cutoff minus share of other pairs

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def separating_cutoff(own: Sequence[float], other: Sequence[float]) -> tuple[float, float]:
    """The distance that best separates `own` (should fall under it) from `other`
    (should not): (cutoff, separation), in the middle of the gap where the best starts."""
    points = sorted({*own, *other})
    best, at = -1.0, points[0]
    for point in points:
        separation = sum(d <= point for d in own) / len(own) - sum(d <= point for d in other) / len(
            other
        )
        if separation > best + 1e-12:  # ties keep the smaller (fewer unrelated candidates)
            best, at = separation, point
    # the best holds from `at` up to the next distance: the cutoff is the middle of that gap
    upper = next((p for p in points if p > at), at)
    return round((at + upper) / 2, 4), best


def implausible_cutoff(
    cutoff: float, own: Sequence[float], in_force: float, provider: EmbeddingProvider
) -> str | None:
    """Why a calibrated cutoff must not be kept, or None: outside what the model was
    measured to need, or dropping more of the sample's own titles from their own entries
    than the cutoff in force does (the leg would go empty for what it finds today)."""
    low, high = provider.plausible_cutoffs
    if not low <= cutoff <= high:
        return (
            f"the calibrated cutoff {cutoff} is outside {low}-{high}, the range measured for "
            f"{provider.model_id} (look-alike titles, such as many 'Deploy NNNN rolled "
            "back' entries, make titles look closer to their entries than topics are)"
        )
    kept = sum(d <= cutoff for d in own) / len(own)
    kept_now = sum(d <= in_force for d in own) / len(own)
    if kept < kept_now - MAX_OWN_PAIRS_LOST:
        return (
            f"the calibrated cutoff {cutoff} would keep {kept:.0%} of the sampled titles' own "
            f"entries where the cutoff in force keeps {kept_now:.0%}"
        )
    return None


def _cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norm if norm else 1.0


class Calibration:
    """Measure, keep and serve each tenant's cutoff (a base of `MemoryService`)."""

    repository: MemoryRepository

    @property
    def reader(self) -> MemoryRepository:
        """Where queries read (a reader when reads scale out); MemoryService's."""
        return self.repository

    blue_green: BlueGreen
    # (tenant, embed_rev) -> (when read, what a query reads of the organization's settings:
    # the calibrated cutoff, its confidence floor, its recalibration from verdicts, the
    # confidence model fitted from its lake; each None when it has none)
    _cutoff_cache: dict[tuple[str, str], tuple[float, QueryReads]]

    def calibrate(
        self, tenant_id: str, *, sample: int = DEFAULT_CALIBRATION_SAMPLE
    ) -> CalibrationReport:
        """Measure the tenant's cutoff for the model it is served from, and keep it."""
        tenant = require_tenant(tenant_id)
        if isinstance(sample, bool) or not isinstance(sample, int):
            raise InvalidInputError("sample", "must be an integer")
        if not MIN_CALIBRATION_SAMPLE <= sample <= MAX_CALIBRATION_SAMPLE:
            raise InvalidInputError(
                "sample",
                f"must be between {MIN_CALIBRATION_SAMPLE} and {MAX_CALIBRATION_SAMPLE}",
            )
        provider = self.blue_green.serving(tenant)
        rows = self.repository.calibration_sample(tenant, provider.embed_rev, sample)
        if len(rows) < MIN_CALIBRATION_SAMPLE:
            raise InvalidInputError(
                "tenant",
                f"has {len(rows)} embedded entries; calibrating needs at least "
                f"{MIN_CALIBRATION_SAMPLE}",
            )
        titles = provider.embed([title for _, title, _ in rows])
        vectors = [vector for _, _, vector in rows]
        half = len(rows) // 2  # each title against the entry half the sample away
        own = [_cosine_distance(t, v) for t, v in zip(titles, vectors, strict=True)]
        other = [
            _cosine_distance(title, vectors[(i + half) % len(rows)])
            for i, title in enumerate(titles)
        ]
        cutoff, separation = separating_cutoff(own, other)
        if separation < MIN_SEPARATION:
            raise InvalidInputError(
                "tenant",
                f"cannot be calibrated: its titles separate their own entries from others "
                f"by {separation:.2f} (at least {MIN_SEPARATION} is needed; identical or "
                "uninformative titles); the model's default cutoff stays",
            )
        in_force = self.vector_cutoff(tenant, provider)
        refusal = implausible_cutoff(cutoff, own, in_force, provider)
        if refusal is not None:
            raise InvalidInputError("tenant", f"{refusal}; the cutoff in force ({in_force}) stays")
        report = CalibrationReport(
            tenant_id=tenant,
            embed_rev=provider.embed_rev,
            vector_cutoff=cutoff,
            provider_default=provider.vector_cutoff,
            sample_size=len(rows),
            own_p50=round(_quantile(own, 0.5), 4),
            own_p95=round(_quantile(own, 0.95), 4),
            other_p5=round(_quantile(other, 0.05), 4),
            other_p50=round(_quantile(other, 0.5), 4),
            separation=round(separation, 4),
        )
        details = {k: v for k, v in report.as_dict().items() if k not in ("tenant_id",)}
        self.repository.store_calibration(tenant, provider.embed_rev, cutoff, len(rows), details)
        self._cutoff_cache.pop((tenant, provider.embed_rev), None)
        return report

    def vector_cutoff(self, tenant_id: str, provider: EmbeddingProvider) -> float:
        """The tenant's calibrated cutoff for `provider`, or the provider's default."""
        cutoff = self._query_settings(tenant_id, provider)[0]
        return provider.vector_cutoff if cutoff is None else cutoff

    def organization_floor(self, tenant_id: str, provider: EmbeddingProvider) -> float | None:
        """The confidence floor the organization set, or None (the model's default)."""
        return self._query_settings(tenant_id, provider)[1]

    def organization_recalibration(
        self, tenant_id: str, provider: EmbeddingProvider
    ) -> Recalibration | None:
        """The recalibration the organization's verdicts made, or None (not enough yet)."""
        return self._query_settings(tenant_id, provider)[2]

    def organization_confidence_fit(
        self, tenant_id: str, provider: EmbeddingProvider
    ) -> dict[str, Any] | None:
        """The confidence model fitted from the organization's lake for `provider`, as
        stored (None: not fitted yet)."""
        return self._query_settings(tenant_id, provider).confidence_fit

    def _query_settings(self, tenant_id: str, provider: EmbeddingProvider) -> QueryReads:
        """What a query reads of the tenant's settings (`QueryReads`): one read, cached."""
        key = (tenant_id, provider.embed_rev)
        cached = self._cutoff_cache.get(key)
        now = time.monotonic()
        if cached is None or now - cached[0] > CUTOFF_CACHE_S:
            cached = (now, self.reader.query_reads(tenant_id, provider.embed_rev))
            self._cutoff_cache[key] = cached
        return cached[1]
