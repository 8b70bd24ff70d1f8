"""What the console asks of Grandbo: the signed admin API, and nothing else.

Every read and every action is one signed request of the organization's admin key (held
here, never sent to the browser), so an action taken in the console is the same audited
event an API call makes, and the console can show nothing the key's organization does not
own: the API decides the tenant from the key, whatever a URL or a form says.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from grandbo.api.auth import Caller, PersonRole, SigningKey
from grandbo.api.client import AdminClient, IamAdminClient
from grandbo.api.people import ROLES

CONSOLE_TIMEOUT_S = 30.0  # a search embeds its topic; a calibration embeds a sample


class UnreadableAnswerError(Exception):
    """What answered at the API's address is not the admin API: a broken HTTP answer, a
    body that is not one JSON object (a proxy's or a website's page, a cut answer), or one
    larger than the client reads. The console shows it as a 502 page, never a 500."""


@dataclass(frozen=True)
class AwsSigner:
    """A person's AWS credentials, signing each request with SigV4 (the /v1/iam routes)."""

    credentials: Any  # botocore Credentials
    region: str


class ConsoleBackend:
    """The admin API's routes, by what the console does with them, signed with a keyring
    key or with a person's AWS credentials; `person` and `role` say who that is (the key's
    own record, or the stack's answer to `whoami` for an AWS identity)."""

    def __init__(
        self,
        base_url: str,
        signer: SigningKey | AwsSigner,
        *,
        timeout: float = CONSOLE_TIMEOUT_S,
    ) -> None:
        self.base_url = base_url
        self._timeout = timeout
        self.client: AdminClient | IamAdminClient
        self.person: str | None
        self.role: PersonRole
        self.via = "key" if isinstance(signer, SigningKey) else "iam"
        if isinstance(signer, SigningKey):
            self.client = AdminClient(base_url, signer, timeout=timeout, component="console")
            caller = Caller.of(signer)
            self.tenant_id, self.key_id = signer.tenant_id, signer.key_id
            self.person, self.role = caller.person, caller.role
            return
        self.client = IamAdminClient(
            base_url, signer.credentials, signer.region, timeout=timeout, component="console"
        )
        me = self._get("/v1/admin/whoami")
        organization, actor, person, role = (
            me.get("organization"),
            me.get("actor"),
            me.get("person"),
            me.get("role"),
        )
        if not (isinstance(organization, str) and organization):
            raise UnreadableAnswerError("not the admin API's answer (whoami names no organization)")
        if not (isinstance(actor, str) and actor):
            raise UnreadableAnswerError("not the admin API's answer (whoami names no actor)")
        if person is not None and not (isinstance(person, str) and person):
            raise UnreadableAnswerError("not the admin API's answer (whoami's person)")
        if role not in ROLES:
            raise UnreadableAnswerError("not the admin API's answer (whoami names no role)")
        self.tenant_id, self.key_id, self.person, self.role = organization, actor, person, role

    @classmethod
    def over_iam(
        cls, base_url: str, credentials: Any, region: str, *, timeout: float = CONSOLE_TIMEOUT_S
    ) -> ConsoleBackend:
        """The admin API as the person whose AWS credentials sign each request: their
        organization and role are the stack's, read back."""
        return cls(base_url, AwsSigner(credentials, region), timeout=timeout)

    def signing_with(self, key: SigningKey) -> ConsoleBackend:
        """The same API, signed with another key of the organization (a person's)."""
        return ConsoleBackend(self.base_url, key, timeout=self._timeout)

    def _call(
        self, method: str, path: str, payload: dict[str, Any] | None, key: str | None
    ) -> dict[str, Any]:
        try:
            answer = self.client.call(method, path, payload, idempotency_key=key)
        except http.client.HTTPException as exc:  # a status line or headers HTTP never had
            raise UnreadableAnswerError(f"not an HTTP answer ({type(exc).__name__})") from exc
        except ValueError as exc:  # not JSON, or over the client's size cap
            raise UnreadableAnswerError(f"not the admin API's answer ({exc})") from exc
        if not isinstance(answer, dict):
            raise UnreadableAnswerError("not the admin API's answer (not a JSON object)")
        return answer

    def _get(self, path: str) -> dict[str, Any]:
        return self._call("GET", path, None, None)

    def _post(
        self, path: str, payload: dict[str, Any] | None = None, *, key: str | None = None
    ) -> dict[str, Any]:
        return self._call("POST", path, payload, key)

    # -- reads ---------------------------------------------------------------------

    def search(self, query: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/admin/query", query)

    def explain(self, query: dict[str, Any], entry_id: UUID) -> dict[str, Any]:
        return self._post("/v1/admin/explanation", {**query, "entry_id": str(entry_id)})

    def catalog(self, filters: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/admin/catalog", filters)

    def history(self, entry_id: UUID) -> dict[str, Any]:
        return self._get(f"/v1/admin/entries/{entry_id}/history")

    def review(self) -> dict[str, Any]:
        return self._get("/v1/admin/review")

    def duplicates(self) -> dict[str, Any]:
        return self._get("/v1/admin/duplicates")

    def health(self) -> dict[str, Any]:
        return self._get("/v1/admin/health")

    def settings(self) -> dict[str, Any]:
        return self._get("/v1/admin/settings")

    def growth(self) -> dict[str, Any]:
        return self._get("/v1/admin/growth")

    def retrievals(self, filters: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/admin/retrievals", filters)

    def retrieval_incidents(self, limit: int = 50) -> dict[str, Any]:
        return self._post("/v1/admin/retrievals/incidents", {"limit": limit})

    def blast_radius(self, query: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/admin/topology/blast-radius", query)

    def dependencies(self, query: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/admin/topology/dependencies", query)

    def topology_nodes(self, limit: int = 1000) -> dict[str, Any]:
        return self._post("/v1/admin/topology/nodes", {"limit": limit})

    def criticality(self, query: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/admin/topology/criticality", query)

    def people(self) -> dict[str, Any]:
        return self._get("/v1/admin/people")

    # -- actions (each an event of the log, or a setting) ---------------------------

    def add_person(self, email: str, role: str, link_days: int) -> dict[str, Any]:
        return self._post(
            "/v1/admin/people", {"email": email, "role": role, "link_days": link_days}
        )

    def link_person(self, email: str, link_days: int) -> dict[str, Any]:
        return self._post("/v1/admin/people/link", {"email": email, "link_days": link_days})

    def revoke_person(self, email: str) -> dict[str, Any]:
        return self._post("/v1/admin/people/revocation", {"email": email})

    def remove_person(self, email: str) -> dict[str, Any]:
        return self._post("/v1/admin/people/removal", {"email": email})

    def create(self, entry: dict[str, Any], *, key: str) -> dict[str, Any]:
        return self._post("/v1/admin/entries", entry, key=key)

    def correct(self, entry_id: UUID, text: dict[str, Any], *, key: str) -> dict[str, Any]:
        return self._post(f"/v1/admin/entries/{entry_id}/corrections", text, key=key)

    def retire(self, entry_id: UUID, retirement: dict[str, Any]) -> dict[str, Any]:
        return self._post(f"/v1/admin/entries/{entry_id}/retirement", retirement)

    def remove_question(self, retrieval_id: UUID, reason: str) -> dict[str, Any]:
        return self._post(f"/v1/admin/retrievals/{retrieval_id}/removal", {"reason": reason})

    def remove_note(self, verdict_id: int, reason: str) -> dict[str, Any]:
        return self._post(f"/v1/admin/verdicts/{verdict_id}/note-removal", {"reason": reason})

    def remove_verdict(self, verdict_id: int, reason: str) -> dict[str, Any]:
        return self._post(f"/v1/admin/verdicts/{verdict_id}/removal", {"reason": reason})

    def redact(self, entry_id: UUID, reason: str, also: list[str]) -> dict[str, Any]:
        return self._post(
            f"/v1/admin/entries/{entry_id}/redaction", {"reason": reason, "also_remove": also}
        )

    def promote(self, entry_id: UUID) -> dict[str, Any]:
        return self._post(f"/v1/admin/entries/{entry_id}/promotion")

    def split(self, entry_id: UUID) -> dict[str, Any]:
        return self._post(f"/v1/admin/entries/{entry_id}/split")

    def set_never_merge(self, entry_id: UUID, never_merge: bool) -> dict[str, Any]:
        return self._post(
            f"/v1/admin/entries/{entry_id}/merge-policy", {"never_merge": never_merge}
        )

    def merge(self, entry_id: UUID, into: UUID) -> dict[str, Any]:
        return self._post(f"/v1/admin/entries/{entry_id}/merge", {"into": str(into)})

    def mark_distinct(self, entry_id: UUID, other: UUID) -> dict[str, Any]:
        return self._post(f"/v1/admin/entries/{entry_id}/distinct", {"other": str(other)})

    def repair(self, checks: list[str]) -> dict[str, Any]:
        return self._post("/v1/admin/health/repair", {"checks": checks})

    def set_episodic_ttl_days(self, days: int) -> dict[str, Any]:
        return self._post("/v1/admin/settings", {"episodic_ttl_days": days})

    def set_min_confidence(self, floor: float | None) -> dict[str, Any]:
        """The organization's confidence floor; None goes back to the model's."""
        body: dict[str, Any] = (
            {"reset_min_confidence": True} if floor is None else {"min_confidence": floor}
        )
        return self._post("/v1/admin/settings", body)

    def set_log_bounds(
        self, query_rate_per_minute: int, retrieval_rows_per_day: int
    ) -> dict[str, Any]:
        return self._post(
            "/v1/admin/settings",
            {
                "query_rate_per_minute": query_rate_per_minute,
                "retrieval_rows_per_day": retrieval_rows_per_day,
            },
        )

    def reset_recalibration(self) -> dict[str, Any]:
        return self._post("/v1/admin/settings", {"reset_recalibration": True})

    def calibrate(self, sample: int) -> dict[str, Any]:
        return self._post("/v1/admin/calibration", {"sample": sample})
