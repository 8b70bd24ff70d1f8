"""The memory repository: the only place that knows the memory store's schema and its SQL.

Every method runs in its own short transaction scoped to one tenant twice over
(`grandbo.storage.tenant_scope`). One module per seam: entry reads, writes, the two
search legs, embeddings, recurrences, redaction, blue/green re-embedding, the
projection rebuild, and the event log read out and written back (a lake moved);
`MemoryRepository` is all of them.
"""

from __future__ import annotations

from grandbo.memory.repository.calibration import CalibrationStore
from grandbo.memory.repository.curation import CatalogFilter, CurationReads
from grandbo.memory.repository.embeddings import EmbeddingStore, EntryForEmbedding
from grandbo.memory.repository.incident_services import IncidentServiceReads
from grandbo.memory.repository.lake import LakeStore
from grandbo.memory.repository.lexical import BM25_B, BM25_K1
from grandbo.memory.repository.log_spellings import LogSpellings
from grandbo.memory.repository.postings import TitleTagBackfill
from grandbo.memory.repository.purge import OrganizationPurge
from grandbo.memory.repository.query_rate import QueryRate
from grandbo.memory.repository.rebuild import ProjectionRebuild, ProjectionReport
from grandbo.memory.repository.redaction import RedactionWrites
from grandbo.memory.repository.retrievals import RetrievalLog
from grandbo.memory.repository.search import (
    LexicalCandidate,
    SearchLegs,
    VectorCandidate,
)
from grandbo.memory.repository.search_function import SearchFunction
from grandbo.memory.repository.vector_staging import VectorStaging

__all__ = [
    "BM25_B",
    "BM25_K1",
    "CatalogFilter",
    "EntryForEmbedding",
    "LexicalCandidate",
    "MemoryRepository",
    "ProjectionReport",
    "SearchLegs",
    "VectorCandidate",
]


class MemoryRepository(
    RedactionWrites,
    SearchFunction,
    EmbeddingStore,
    VectorStaging,
    ProjectionRebuild,
    CalibrationStore,
    TitleTagBackfill,
    OrganizationPurge,
    LakeStore,
    CurationReads,
    IncidentServiceReads,
    RetrievalLog,
    LogSpellings,
    QueryRate,
):
    """All reads and writes of memory entries, events, tag statistics and embeddings."""
