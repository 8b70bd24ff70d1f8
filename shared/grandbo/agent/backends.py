"""What the MCP tools read from: the local store, or a deployed Grandbo over HTTP.

Both answer with the domain's own models, so a tool's structured output is the same
document whichever backend answers, and the same one the HTTP API returns.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol
from uuid import UUID

from grandbo.api.client import MemoryClient
from grandbo.memory.domain.models import (
    Feedback,
    FeedbackCounts,
    MemoryEntry,
    MemoryQueryResult,
)
from grandbo.runtime.lambda_container import LambdaRuntime
from grandbo.topology.model import BlastRadius, Criticality

SERVICE = "Service"
# who asks and judges through the stdio door (no token names a key there)
STDIO_CALLER = "stdio"


class MemoryBackend(Protocol):
    """Reads for one tenant. `tenant` is None only where the backend's credentials
    already name it (a remote API's token). `caller` is who asks and judges: the query
    token's key id (an agent's key is one identity whichever door it uses: the query
    API's retrieval log names the same key), STDIO_CALLER on stdio."""

    def query(
        self,
        tenant: str | None,
        topic: str,
        limit: int,
        service: str | None,
        scope: str | None,
        as_of: datetime | None = None,
        min_confidence: float | None = None,
        incident_id: str | None = None,
        caller: str = STDIO_CALLER,
    ) -> MemoryQueryResult: ...

    def entry(self, tenant: str | None, entry_id: UUID) -> MemoryEntry: ...

    def blast_radius(
        self, tenant: str | None, service: str, hops: int, namespaces: str = "topology"
    ) -> BlastRadius: ...

    def criticality(
        self, tenant: str | None, service: str, namespaces: str = "topology"
    ) -> Criticality: ...

    def feedback(
        self, tenant: str | None, caller: str, entry_id: UUID, feedback: Feedback
    ) -> FeedbackCounts: ...

    def close(self) -> None: ...


class StoreBackend:
    """The local store through the runtime the local runner uses: a pool of containers,
    each its own connection, health-checked and reconnected after a database restart."""

    def __init__(self, runtime: LambdaRuntime) -> None:
        self.runtime = runtime

    def query(
        self,
        tenant: str | None,
        topic: str,
        limit: int,
        service: str | None,
        scope: str | None,
        as_of: datetime | None = None,
        min_confidence: float | None = None,
        incident_id: str | None = None,
        caller: str = STDIO_CALLER,
    ) -> MemoryQueryResult:
        with self.runtime.container():
            # as the query API answers it, recorded in the retrieval log alike: under the
            # key that asks, as the query API records it (one asker, whichever door)
            return self.runtime.query_org_memory(
                _required(tenant),
                topic,
                caller=caller,
                incident_id=incident_id,
                limit=limit,
                service=service,
                scope=scope,
                as_of=as_of,
                min_confidence=min_confidence,
            )

    def entry(self, tenant: str | None, entry_id: UUID) -> MemoryEntry:
        with self.runtime.container():
            return self.runtime.service().get_entry(_required(tenant), entry_id)

    def blast_radius(
        self, tenant: str | None, service: str, hops: int, namespaces: str = "topology"
    ) -> BlastRadius:
        with self.runtime.container():
            return self.runtime.topology().blast_radius(
                _required(tenant), SERVICE, service, hops=hops, namespaces=namespaces
            )

    def criticality(
        self, tenant: str | None, service: str, namespaces: str = "topology"
    ) -> Criticality:
        with self.runtime.container():
            return self.runtime.topology().criticality(
                _required(tenant), SERVICE, service, namespaces=namespaces
            )

    def feedback(
        self, tenant: str | None, caller: str, entry_id: UUID, feedback: Feedback
    ) -> FeedbackCounts:
        with self.runtime.container():
            outcome = self.runtime.service().record_caller_feedback(
                _required(tenant), entry_id, feedback, caller=caller
            )
        return outcome.entry.feedback

    def close(self) -> None:
        self.runtime.close()


class RemoteBackend:
    """A deployed Grandbo's query API; the token is bound to one tenant, which the API
    proves, so `tenant` is not sent (there is nowhere to send it)."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    def query(
        self,
        tenant: str | None,
        topic: str,
        limit: int,
        service: str | None,
        scope: str | None,
        as_of: datetime | None = None,
        min_confidence: float | None = None,
        incident_id: str | None = None,
        caller: str = STDIO_CALLER,
    ) -> MemoryQueryResult:
        # the API logs the question under the token's own key: `caller` is not sent
        answer = self.client.query_org_memory(
            topic,
            limit=limit,
            service=service,
            scope=scope,
            as_of=as_of,
            min_confidence=min_confidence,
            incident_id=incident_id,
        )
        return MemoryQueryResult.model_validate(answer)

    def entry(self, tenant: str | None, entry_id: UUID) -> MemoryEntry:
        return MemoryEntry.model_validate(self.client.get_entry(entry_id))

    def blast_radius(
        self, tenant: str | None, service: str, hops: int, namespaces: str = "topology"
    ) -> BlastRadius:
        answer = self.client.blast_radius(service, hops=hops, namespaces=namespaces)
        return BlastRadius.model_validate(answer)

    def criticality(
        self, tenant: str | None, service: str, namespaces: str = "topology"
    ) -> Criticality:
        return Criticality.model_validate(self.client.criticality(service, namespaces=namespaces))

    def feedback(
        self, tenant: str | None, caller: str, entry_id: UUID, feedback: Feedback
    ) -> FeedbackCounts:
        answer = self.client.record_feedback(
            entry_id,
            feedback.verdict.value,
            feedback.incident_id,
            note=feedback.note,
            confidence=feedback.confidence,
        )
        return FeedbackCounts.model_validate(answer.get("feedback"))

    def close(self) -> None:
        return None


def _required(tenant: str | None) -> str:
    if not tenant:  # the server resolves it before any call; never a tool argument
        raise RuntimeError("no tenant resolved for a local-store call")
    return tenant
