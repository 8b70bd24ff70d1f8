"""Calibrated vector cutoffs (a sample of the lake to measure, the measurement kept per
tenant and embedding revision), the confidence settings a query reads with them, and the
verdicts, tied to what the retrieval log served, that an organization's recalibration is
fit from."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from grandbo.errors import StoreUnavailableError
from grandbo.memory.domain.recalibration import Recalibration, ServedVerdict
from grandbo.storage.tenant_scope import TenantScopedRepository


class CalibrationStore(TenantScopedRepository):
    def calibration_sample(
        self, tenant_id: str, embed_rev: str, limit: int
    ) -> list[tuple[UUID, str, list[float]]]:
        """Up to `limit` active entries with a vector of `embed_rev`, at random: id, title,
        vector."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT entry_id, title, embedding FROM org_memory_entries"
                " WHERE tenant_id = %s AND status = 'active' AND embed_rev = %s"
                " ORDER BY random() LIMIT %s",
                (tenant_id, embed_rev, limit),
            )
            return [
                (row["entry_id"], row["title"], [float(x) for x in row["embedding"].to_list()])
                for row in cur
            ]

    def store_calibration(
        self,
        tenant_id: str,
        embed_rev: str,
        vector_cutoff: float,
        sample_size: int,
        details: dict[str, Any],
    ) -> None:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_calibrations"
                " (tenant_id, embed_rev, vector_cutoff, sample_size, details)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, embed_rev) DO UPDATE"
                " SET vector_cutoff = excluded.vector_cutoff,"
                "     sample_size = excluded.sample_size, details = excluded.details,"
                "     measured_at = now()",
                (tenant_id, embed_rev, vector_cutoff, sample_size, Jsonb(details)),
            )

    def calibrated_cutoff(self, tenant_id: str, embed_rev: str) -> float | None:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT vector_cutoff FROM org_memory_calibrations"
                " WHERE tenant_id = %s AND embed_rev = %s",
                (tenant_id, embed_rev),
            )
            row = cur.fetchone()
            return None if row is None else float(row["vector_cutoff"])

    def query_reads(
        self, tenant_id: str, embed_rev: str
    ) -> tuple[float | None, float | None, Recalibration | None]:
        """What a query reads of the tenant's settings, in one read: the calibrated cutoff,
        the confidence floor and the recalibration from its verdicts. On a schema before
        migration 0026 (code deployed ahead of its migration): the cutoff alone."""
        try:
            return self._query_reads(tenant_id, embed_rev)
        except psycopg.errors.UndefinedColumn:
            return self.calibrated_cutoff(tenant_id, embed_rev), None, None

    def _query_reads(
        self, tenant_id: str, embed_rev: str
    ) -> tuple[float | None, float | None, Recalibration | None]:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT c.vector_cutoff, s.min_confidence, s.confidence_scale,"
                " s.confidence_shift, s.confidence_verdicts, s.confidence_model"
                " FROM (SELECT 1) one"
                " LEFT JOIN org_memory_calibrations c"
                "   ON c.tenant_id = %(tenant)s AND c.embed_rev = %(rev)s"
                " LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = %(tenant)s",
                {"tenant": tenant_id, "rev": embed_rev},
            )
            row = cur.fetchone()
            assert row is not None
            cutoff, floor = row["vector_cutoff"], row["min_confidence"]
            recalibration = (
                None
                if row["confidence_scale"] is None
                else Recalibration(
                    float(row["confidence_scale"]),
                    float(row["confidence_shift"]),
                    int(row["confidence_verdicts"]),
                    row["confidence_model"] or "",
                )
            )
            return (
                None if cutoff is None else float(cutoff),
                None if floor is None else float(floor),
                recalibration,
            )

    def served_verdicts(
        self, tenant_id: str, limit: int, model: str | None = None
    ) -> list[ServedVerdict]:
        """What the organization's recalibration is fit from: of its latest `limit`
        verdicts not imported, newest first, those the retrieval log ties to a served hit,
        each with the confidence that hit was served with and its source (the event's
        actor). A verdict's tie is the latest retrieval of its incident, asked before it,
        whose hits held its entry (0032's index by incident finds it); the confidence a
        caller sent with it is never read. A redacted verdict names no incident: no tie.
        Nothing on a schema before migration 0033 (nothing to tell imports by). With
        `model`, only hits that model scored (a hit the keyword model scored, where meaning
        search could not see it, is not evidence about the provider's model; a hit logged
        before hits named their model counts as the model's)."""
        try:
            return self._served_verdicts(tenant_id, limit, model)
        except (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable):
            return []

    def _served_verdicts(
        self, tenant_id: str, limit: int, model: str | None
    ) -> list[ServedVerdict]:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "WITH verdicts AS MATERIALIZED ("
                "  SELECT event_id, entry_id, actor, recorded_at,"
                "    payload->>'incident_id' AS incident_id,"
                "    payload->>'verdict' = 'helpful' AS helpful"
                "  FROM org_memory_events"
                "  WHERE tenant_id = %(tenant)s AND event_type = 'feedback_recorded'"
                "    AND NOT imported"
                "  ORDER BY recorded_at DESC, event_id DESC LIMIT %(limit)s)"
                " SELECT served.confidence, served.asker, v.helpful, v.actor FROM verdicts v"
                " CROSS JOIN LATERAL ("
                "  SELECT (h->>'confidence')::float8 AS confidence, h->>'model' AS model,"
                "    r.caller AS asker"
                "  FROM org_memory_retrievals r"
                "  CROSS JOIN LATERAL jsonb_array_elements(r.hits) h"
                "  WHERE r.tenant_id = %(tenant)s AND r.incident_id = v.incident_id"
                "    AND r.at <= v.recorded_at AND h->>'entry_id' = v.entry_id::text"
                "    AND jsonb_typeof(h->'confidence') = 'number'"
                "  ORDER BY r.at DESC, r.retrieval_id DESC LIMIT 1) served"
                " WHERE %(model)s::text IS NULL OR coalesce(served.model, %(model)s) = %(model)s"
                " ORDER BY v.recorded_at DESC, v.event_id DESC",
                {"tenant": tenant_id, "limit": limit, "model": model},
            )
            return [
                ServedVerdict(
                    confidence=float(row["confidence"]),
                    helpful=bool(row["helpful"]),
                    source=str(row["actor"]),
                    asker=str(row["asker"]),
                )
                for row in cur
            ]

    def store_recalibration(
        self, tenant_id: str, recalibration: Recalibration | None, default_ttl_days: int
    ) -> bool:
        """The tenant's recalibration from its verdicts (None: none, the model as fit).
        False on a schema before migration 0026 (nothing to store it in: nothing stored)."""
        values = (
            (None, None, None, None)
            if recalibration is None
            else (
                recalibration.scale,
                recalibration.shift,
                recalibration.verdicts,
                recalibration.model,
            )
        )
        try:
            with self._tenant_scope(tenant_id) as cur:
                cur.execute(
                    "INSERT INTO org_memory_tenant_settings (tenant_id, episodic_ttl_days,"
                    " confidence_scale, confidence_shift, confidence_verdicts, confidence_model)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant_id) DO UPDATE SET"
                    " confidence_scale = excluded.confidence_scale,"
                    " confidence_shift = excluded.confidence_shift,"
                    " confidence_verdicts = excluded.confidence_verdicts,"
                    " confidence_model = excluded.confidence_model",
                    (tenant_id, default_ttl_days, *values),
                )
        except psycopg.errors.UndefinedColumn:
            return False
        return True

    def set_min_confidence(
        self, tenant_id: str, floor: float | None, default_ttl_days: int
    ) -> None:
        """The organization's confidence floor (None: the model's default); on a schema
        before migration 0026, StoreUnavailableError (a 503 that says to migrate)."""
        try:
            self._set_min_confidence(tenant_id, floor, default_ttl_days)
        except psycopg.errors.UndefinedColumn:
            raise StoreUnavailableError(
                "the database predates migration 0026 (the confidence floor): run the "
                "migrations, then set it again"
            ) from None

    def _set_min_confidence(
        self, tenant_id: str, floor: float | None, default_ttl_days: int
    ) -> None:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_tenant_settings"
                " (tenant_id, episodic_ttl_days, min_confidence) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id) DO UPDATE SET min_confidence = excluded.min_confidence",
                (tenant_id, default_ttl_days, floor),
            )
