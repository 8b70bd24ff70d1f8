"""Calibrated vector cutoffs: a sample of the lake to measure, and the measurement kept
per tenant and embedding revision."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

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

    def query_settings(self, tenant_id: str, embed_rev: str) -> tuple[float | None, float | None]:
        """The tenant's calibrated cutoff for `embed_rev` and its confidence floor (None:
        the model's), in one read. On a schema before migration 0026 (code deployed ahead of
        its migration) there is no floor to read: the cutoff alone."""
        try:
            return self._query_settings(tenant_id, embed_rev)
        except psycopg.errors.UndefinedColumn:
            return self.calibrated_cutoff(tenant_id, embed_rev), None

    def _query_settings(self, tenant_id: str, embed_rev: str) -> tuple[float | None, float | None]:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT c.vector_cutoff, s.min_confidence FROM (SELECT 1) one"
                " LEFT JOIN org_memory_calibrations c"
                "   ON c.tenant_id = %(tenant)s AND c.embed_rev = %(rev)s"
                " LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = %(tenant)s",
                {"tenant": tenant_id, "rev": embed_rev},
            )
            row = cur.fetchone()
            assert row is not None
            cutoff, floor = row["vector_cutoff"], row["min_confidence"]
            return (
                None if cutoff is None else float(cutoff),
                None if floor is None else float(floor),
            )

    def set_min_confidence(
        self, tenant_id: str, floor: float | None, default_ttl_days: int
    ) -> None:
        """The organization's confidence floor (None: the model's default)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_tenant_settings"
                " (tenant_id, episodic_ttl_days, min_confidence) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id) DO UPDATE SET min_confidence = excluded.min_confidence",
                (tenant_id, default_ttl_days, floor),
            )
