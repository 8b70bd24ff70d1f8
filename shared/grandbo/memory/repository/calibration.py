"""Calibrated vector cutoffs (a sample of the lake to measure, the measurement kept per
tenant and embedding revision), the confidence settings a query reads with them, and the
verdicts, tied to what the retrieval log served, that an organization's recalibration is
fit from."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from grandbo.errors import StoreUnavailableError
from grandbo.memory.domain.recalibration import (
    INCIDENT_ACTOR_PREFIX,
    INCIDENT_SOURCE,
    MAX_PER_SOURCE,
    Recalibration,
    ServedVerdict,
)
from grandbo.storage.tenant_scope import TenantScopedRepository

_SETTINGS = (
    "SELECT c.vector_cutoff, s.min_confidence, s.confidence_scale, s.confidence_shift,"
    " s.confidence_verdicts, s.confidence_model, s.query_rate_per_minute, {fit} AS fit"
    " FROM (SELECT 1) one"
    " LEFT JOIN org_memory_calibrations c"
    "   ON c.tenant_id = %(tenant)s AND c.embed_rev = %(rev)s"
    " LEFT JOIN org_memory_tenant_settings s ON s.tenant_id = %(tenant)s"
)
_QUERY_READS = _SETTINGS.format(fit="f.model") + (
    " LEFT JOIN org_memory_confidence_fits f ON f.tenant_id = %(tenant)s AND f.embed_rev = %(rev)s"
)
_QUERY_READS_BEFORE_0037 = _SETTINGS.format(fit="NULL::jsonb")


class QueryReads(NamedTuple):
    """What a query reads of its organization's settings, in one read (each None where it
    has none): the calibrated cutoff, the confidence floor, the recalibration from its
    verdicts, and the confidence model fitted from its lake (0037: the stored model, as
    `ConfidenceModel.as_dict` wrote it)."""

    cutoff: float | None
    floor: float | None
    recalibration: Recalibration | None
    confidence_fit: dict[str, Any] | None = None
    query_rate: int | None = None  # its questions per caller and minute (0034)


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

    def query_reads(self, tenant_id: str, embed_rev: str) -> QueryReads:
        """What a query reads of the tenant's settings, in one read (`QueryReads`). On a
        schema before migration 0037 (code deployed ahead of its migration): without the
        fitted model; before 0026: the cutoff alone."""
        try:
            return self._query_reads(tenant_id, embed_rev, fitted=True)
        except psycopg.errors.UndefinedTable:
            pass
        try:
            return self._query_reads(tenant_id, embed_rev, fitted=False)
        except psycopg.errors.UndefinedColumn:
            return QueryReads(self.calibrated_cutoff(tenant_id, embed_rev), None, None)

    def _query_reads(self, tenant_id: str, embed_rev: str, *, fitted: bool) -> QueryReads:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                _QUERY_READS if fitted else _QUERY_READS_BEFORE_0037,
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
            return QueryReads(
                None if cutoff is None else float(cutoff),
                None if floor is None else float(floor),
                recalibration,
                row["fit"],
                row["query_rate_per_minute"],
            )

    def lake_question_sources(
        self, tenant_id: str, embed_rev: str, limit: int
    ) -> tuple[int, list[tuple[UUID, str, str]]]:
        """How many active entries have a vector of `embed_rev`, and up to `limit` of them
        (id, title, summary) in an order fixed by their ids (the same lake gives the same
        sample): what a confidence fit makes its questions from."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT count(*) AS n FROM org_memory_entries"
                " WHERE tenant_id = %s AND status = 'active' AND embed_rev = %s",
                (tenant_id, embed_rev),
            )
            row = cur.fetchone()
            embedded = 0 if row is None else int(row["n"])
            cur.execute(
                "SELECT entry_id, title, summary FROM org_memory_entries"
                " WHERE tenant_id = %s AND status = 'active' AND embed_rev = %s"
                " ORDER BY md5(entry_id::text) LIMIT %s",
                (tenant_id, embed_rev, limit),
            )
            return embedded, [(r["entry_id"], r["title"], r["summary"]) for r in cur]

    def store_confidence_fit(
        self,
        tenant_id: str,
        embed_rev: str,
        model: dict[str, Any],
        questions: int,
        details: dict[str, Any],
    ) -> None:
        """Keep the organization's fitted confidence model for `embed_rev` (replacing the
        last)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_confidence_fits"
                " (tenant_id, embed_rev, model, questions, details)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, embed_rev) DO UPDATE"
                " SET model = excluded.model, questions = excluded.questions,"
                "     details = excluded.details, fitted_at = now(), attempted_at = now()",
                (tenant_id, embed_rev, Jsonb(model), questions, Jsonb(details)),
            )

    def record_confidence_attempt(
        self, tenant_id: str, embed_rev: str, questions: int, details: dict[str, Any]
    ) -> None:
        """Record a fit that was measured and not kept (migration 0039): the organization
        is not due again until REFIT_AFTER_S, and a model kept before stays."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_confidence_fits"
                " (tenant_id, embed_rev, model, questions, details, attempted_at)"
                " VALUES (%s, %s, NULL, %s, %s, now()) ON CONFLICT (tenant_id, embed_rev)"
                " DO UPDATE SET attempted_at = now(),"
                "     details = org_memory_confidence_fits.details || jsonb_build_object("
                "         'last_attempt', excluded.details)",
                (tenant_id, embed_rev, questions, Jsonb(details)),
            )

    def confidence_fit(self, tenant_id: str, embed_rev: str) -> dict[str, Any] | None:
        """The organization's fitted model for `embed_rev` and when and on what it was
        fitted (None: never fitted, or a schema before 0037)."""
        try:
            with self._tenant_scope(tenant_id) as cur:
                cur.execute(
                    "SELECT model, questions, details, fitted_at"
                    " FROM org_memory_confidence_fits WHERE tenant_id = %s AND embed_rev = %s",
                    (tenant_id, embed_rev),
                )
                row = cur.fetchone()
        except psycopg.errors.UndefinedTable:
            return None
        return None if row is None else dict(row)

    def confidence_fits_due(self, embed_revs: dict[str, str], older_than_s: float) -> list[str]:
        """Of the organizations (id -> the embedding revision it is served from), those with
        no fit of that revision, kept or not, made in the last `older_than_s` seconds."""
        due = []
        for tenant_id, embed_rev in embed_revs.items():
            with self._tenant_scope(tenant_id) as cur:
                cur.execute(
                    "SELECT greatest(fitted_at, attempted_at)"
                    "   > now() - make_interval(secs => %s) AS fresh"
                    " FROM org_memory_confidence_fits WHERE tenant_id = %s AND embed_rev = %s",
                    (older_than_s, tenant_id, embed_rev),
                )
                row = cur.fetchone()
            if row is None or not row["fresh"]:
                due.append(tenant_id)
        return due

    def served_verdicts(
        self, tenant_id: str, limit: int, model: str | None = None
    ) -> list[ServedVerdict]:
        """What the organization's recalibration is fit from: its latest `limit` verdicts
        (newest first, at most MAX_PER_SOURCE of one source) that the retrieval log ties
        to a served hit, each with the confidence that hit was served with, its source
        (the event's actor), the caller who asked and the incident: the window is taken
        over tied verdicts only, so verdicts tied to nothing never crowd it. A verdict's
        tie is the latest retrieval of its incident, asked before it, whose hits held its
        entry (0032's index by incident finds it); the confidence a caller sent with it is
        never read. Left out: an imported verdict (migration 0033), one an admin removed
        (an event of the organization's own, migration 0036), one recorded before the
        organization's epoch (an admin's reset) or tied to an answer served before it, a
        redacted verdict (it names no incident). Nothing on a schema before migration
        0033. With `model`, only hits that model scored (a hit the keyword model scored,
        where meaning search could not see it, is not evidence about the provider's model;
        a hit logged before hits named their model counts as the model's)."""
        epoch = self.recalibration_epoch(tenant_id)
        try:
            return self._served_verdicts(tenant_id, limit, model, epoch)
        except (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable):
            return []

    def recalibration_epoch(self, tenant_id: str) -> datetime | None:
        """When an admin last reset the organization's recalibration (None: never, or a
        schema before migration 0036)."""
        try:
            with self._tenant_scope(tenant_id) as cur:
                cur.execute(
                    "SELECT recalibration_epoch FROM org_memory_tenant_settings"
                    " WHERE tenant_id = %s",
                    (tenant_id,),
                )
                row = cur.fetchone()
        except psycopg.errors.UndefinedColumn:
            return None
        return None if row is None else row["recalibration_epoch"]

    def _served_verdicts(
        self, tenant_id: str, limit: int, model: str | None, epoch: datetime | None
    ) -> list[ServedVerdict]:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                # no verdict older than the oldest question the log holds under an incident
                # can be tied (the log forgets past its retention): the scan's bound
                "WITH since AS MATERIALIZED (SELECT greatest(%(epoch)s::timestamptz,"
                "   (SELECT min(at) FROM org_memory_retrievals"
                "    WHERE tenant_id = %(tenant)s AND incident_id IS NOT NULL)) AS at),"
                " tied AS MATERIALIZED ("
                "  SELECT v.event_id, v.recorded_at, v.actor,"
                "    v.payload->>'incident_id' AS incident_id,"
                "    v.payload->>'verdict' = 'helpful' AS helpful,"
                "    served.confidence, served.asker,"
                "    CASE WHEN starts_with(v.actor, %(incident_actor)s)"
                "      THEN %(incident_source)s ELSE v.actor END AS source"
                "  FROM since, org_memory_events v"
                "  CROSS JOIN LATERAL ("
                "   SELECT (h->>'confidence')::float8 AS confidence, h->>'model' AS model,"
                "     r.caller AS asker"
                "   FROM org_memory_retrievals r"
                "   CROSS JOIN LATERAL jsonb_array_elements(r.hits) h"
                "   WHERE r.tenant_id = %(tenant)s"
                "     AND r.incident_id = v.payload->>'incident_id'"
                "     AND r.at <= v.recorded_at AND r.at >= since.at"
                "     AND h->>'entry_id' = v.entry_id::text"
                "     AND jsonb_typeof(h->'confidence') = 'number'"
                "   ORDER BY r.at DESC, r.retrieval_id DESC LIMIT 1) served"
                "  WHERE v.tenant_id = %(tenant)s AND v.event_type = 'feedback_recorded'"
                "    AND NOT v.imported AND v.recorded_at >= since.at"
                "    AND (%(model)s::text IS NULL"
                "      OR coalesce(served.model, %(model)s) = %(model)s)"
                "    AND NOT EXISTS (SELECT 1 FROM org_memory_events x"
                "      WHERE x.tenant_id = v.tenant_id AND x.event_type = 'feedback_removed'"
                "        AND NOT x.imported AND x.payload->>'verdict_key' = v.idempotency_key)),"
                " windowed AS (SELECT *, row_number() OVER (PARTITION BY source"
                "   ORDER BY recorded_at DESC, event_id DESC) AS nth FROM tied)"
                " SELECT confidence, asker, helpful, actor, incident_id FROM windowed"
                " WHERE nth <= %(per_source)s"
                " ORDER BY recorded_at DESC, event_id DESC LIMIT %(limit)s",
                {
                    "tenant": tenant_id,
                    "limit": limit,
                    "model": model,
                    "epoch": epoch,
                    "per_source": MAX_PER_SOURCE,
                    "incident_actor": INCIDENT_ACTOR_PREFIX,
                    "incident_source": INCIDENT_SOURCE,
                },
            )
            return [
                ServedVerdict(
                    confidence=float(row["confidence"]),
                    helpful=bool(row["helpful"]),
                    source=str(row["actor"]),
                    asker=str(row["asker"]),
                    incident=str(row["incident_id"]),
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

    def start_recalibration_epoch(self, tenant_id: str, default_ttl_days: int) -> datetime:
        """An admin's reset: the recalibration dropped and a new epoch started now (every
        later fit ignores the verdicts before it), in one transaction; the epoch's moment.
        On a schema before migration 0026 or 0036, StoreUnavailableError (a 503 that says
        to migrate): a reset that no later fit honours would be undone by the next
        verdict."""
        migration = "0026"  # the recalibration's columns, then 0036's epoch
        try:
            with self._tenant_scope(tenant_id) as cur:
                cur.execute(
                    "INSERT INTO org_memory_tenant_settings (tenant_id, episodic_ttl_days,"
                    " confidence_scale) VALUES (%s, %s, NULL) ON CONFLICT (tenant_id) DO UPDATE"
                    " SET confidence_scale = NULL, confidence_shift = NULL,"
                    " confidence_verdicts = NULL, confidence_model = NULL",
                    (tenant_id, default_ttl_days),
                )
                migration = "0036"
                cur.execute(
                    "UPDATE org_memory_tenant_settings SET recalibration_epoch = clock_timestamp()"
                    " WHERE tenant_id = %s RETURNING recalibration_epoch",
                    (tenant_id,),
                )
                row = cur.fetchone()
                assert row is not None
                return row["recalibration_epoch"]  # type: ignore[no-any-return]
        except psycopg.errors.UndefinedColumn:
            raise StoreUnavailableError(
                f"the database predates migration {migration} (the recalibration): run the "
                "migrations"
            ) from None

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
