"""`grandbo smoke`: what a new deploy must show, step by step, against a live stage.

Each step prints what it checked and how long it took; the first that fails ends the run
(exit 1, the step named) and every smoke entry written so far is redacted before the
command returns. The check writes into the smoke organization (`grandbo.smoke.organization`)
unless told another; one lent for the run (a local runner's) is purged at the end and its
keys given back, so nothing of the check stays in any organization; told another, the
check says what stays there. The steps, in order:

1. keys        the organization's admin and query keys (the stage's keyring; lent
               through a local runner's keyring file for its smoke organization)
2. query       a query with a minted token, through the edge
3. admin write a signed write of a marked smoke entry
4. admin read  the same entry read back, signed
5. incident    an incident-closed event delivered the way the platform does (the stage's
               bus; locally the local door) and its entry found
6. embedded    that entry embedded (by Titan in AWS) within the embed alarm's window
7. reader      a query's searches served by a reader, where the stage has one
8. redaction   the smoke entry redacted: 410 afterwards
9. alarm topic a test message to the alarm topic's subscribers (only with --notify)
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from grandbo.api.auth import SigningKey
from grandbo.api.client import AdminClient, GrandboHTTPError, MemoryClient
from grandbo.smoke.organization import SMOKE_TENANT
from grandbo.smoke.targets import Target

# the embed alarm's window (infra/alarms.py EMBED_QUEUE_OLDEST_S): a job older is paged on
EMBED_WITHIN_S = 900.0
INCIDENT_WITHIN_S = 120.0
POLL_S = 1.0
TOPIC = "a deploy's smoke check asks whether memory answers queries through the edge"
# every smoke entry's title begins so (and its summary names its run): what the cleanup
# finds of a run that could not say what it wrote
SMOKE_TITLE = "Smoke check"
_SMOKE_TITLE_RE = re.compile(r"^Smoke check smoke-[0-9a-f]{10} ")
# a purge's confirmation is refused when the organization changed after it was asked for
# (a question the runner logged late): asked again, at most this many times
PURGE_ATTEMPTS = 3


class StepFailedError(Exception):
    """A step's check did not hold; the message says what was seen."""


@dataclass
class SmokeRun:
    """One run: its marker, the entries it wrote (redacted at the end), what it printed."""

    target: Target
    tenant: str = SMOKE_TENANT
    notify: bool = False
    embed_within_s: float = EMBED_WITHIN_S
    incident_within_s: float = INCIDENT_WITHIN_S
    out: TextIO | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    written: list[str] = field(default_factory=list)
    redacted: set[str] = field(default_factory=set)
    admin: AdminClient | None = None
    memory: MemoryClient | None = None
    admin_entry: str | None = None
    incident_entry: str | None = None
    lent: bool = False  # the organization is lent for this run: purged at its end

    @property
    def marker(self) -> str:
        return f"smoke-{self.run_id}"

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    # -- the steps ------------------------------------------------------------------------

    def step_keys(self) -> str:
        self.lent = self.target.lends(self.tenant)
        admin, query = self.target.keys(self.tenant)
        self.admin = AdminClient(self.target.api_url, admin, timeout=15, component="smoke")
        self.memory = _memory_client(self.target.api_url, query)
        lent = ", lent for this run" if self.lent else ""
        return f"admin key {admin.key_id}, query key {query.key_id} for {self.tenant}{lent}"

    def step_query(self) -> str:
        answer = self._memory().query_org_memory(TOPIC, limit=3)
        hits = answer.get("hits")
        if not isinstance(hits, list) or "metadata" not in answer:
            raise StepFailedError(f"the answer is no query result: {sorted(answer)}")
        return f"200 with {len(hits)} hit(s), read from {answer['metadata'].get('read_from')}"

    def step_admin_write(self) -> str:
        created = self._admin().create_entry(
            f"{SMOKE_TITLE} {self.marker} wrote this entry",
            f"A deploy's smoke check ({self.marker}) wrote this entry to show that signed "
            "admin writes are stored; the check redacts it before it ends.",
            tags=["smoke"],
            idempotency_key=f"{self.marker}:admin",
        )
        self.admin_entry = str(created["entry"]["entry_id"])
        self.written.append(self.admin_entry)
        return f"entry {self.admin_entry} created"

    def step_admin_read(self) -> str:
        entry = self._admin().get_entry(self._id(self.admin_entry))
        if self.marker not in entry.get("title", ""):
            raise StepFailedError(f"read back another text: {entry.get('title')!r}")
        return f"entry {self.admin_entry} read back, revision {entry['revision']}"

    def step_incident(self) -> str:
        incident_id = f"SMOKE-{self.run_id}"
        event = smoke_incident(self.tenant, incident_id, self.marker)
        delivered = self.target.put_incident(event)
        entry = self._poll(
            self.incident_within_s,
            lambda: self._catalog_entry(),
            f"no entry of incident {incident_id} within {self.incident_within_s:.0f} s",
        )
        self.incident_entry = str(entry["entry_id"])
        self.written.append(self.incident_entry)
        return f"{delivered}; entry {self.incident_entry} recorded"

    def step_embedded(self) -> str:
        def embedded() -> dict[str, Any] | None:
            entry = self._admin().get_entry(self._id(self.incident_entry))
            if entry.get("embedded_revision") == entry.get("revision"):
                return entry
            return None

        entry = self._poll(
            self.embed_within_s,
            embedded,
            f"entry {self.incident_entry} not embedded within {self.embed_within_s:.0f} s "
            "(the embed queue, the worker's errors, Bedrock access)",
        )
        rev = str(entry.get("embed_rev"))
        prefix = self.target.embed_rev_prefix
        if prefix is not None and not rev.startswith(prefix):
            raise StepFailedError(f"embedded by {rev}, not by {prefix}")
        return f"entry {self.incident_entry} embedded ({rev})"

    def step_reader(self) -> str | None:
        if not self.target.has_reader:
            return None  # skipped: the stage has no reader
        answer = self._memory().query_org_memory(TOPIC, limit=1)
        read_from = answer.get("metadata", {}).get("read_from")
        if read_from != "reader":
            raise StepFailedError(
                f"the searches ran on the {read_from}: the reader is not reached "
                "(ReaderFallbacks, the proxy's read-only endpoint)"
            )
        return "the query's searches ran on a reader (pg_is_in_recovery)"

    def step_redaction(self) -> str:
        entry_id = self._id(self.admin_entry)
        self._redact(entry_id)
        try:
            self._admin().get_entry(entry_id)
        except GrandboHTTPError as exc:
            if exc.status == 410:
                return f"entry {entry_id} redacted: 410 with its tombstone"
            raise
        raise StepFailedError(f"entry {entry_id} still readable after its redaction")

    def step_alarm_topic(self) -> str | None:
        if not self.notify:
            return None  # skipped: asked for with --notify
        message_id = self.target.notify(
            f"Grandbo smoke check {self.marker}",
            f"A test message of `grandbo smoke` ({self.marker}, {datetime.now(UTC):%FT%TZ}): "
            "the alarm topic delivers to its subscribers. Nothing is wrong.",
        )
        return f"test message {message_id} published to the alarm topic"

    # -- running ---------------------------------------------------------------------------

    def run(self) -> int:
        """Every step in order; 0 when all held, 1 naming the first that did not."""
        steps: list[tuple[str, Callable[[], str | None]]] = [
            ("keys", self.step_keys),
            ("query", self.step_query),
            ("admin write", self.step_admin_write),
            ("admin read", self.step_admin_read),
            ("incident", self.step_incident),
            ("embedded", self.step_embedded),
            ("reader", self.step_reader),
            ("redaction", self.step_redaction),
            ("alarm topic", self.step_alarm_topic),
        ]
        self.say(f"smoke check {self.marker} of {self.target.name}, organization {self.tenant}")
        if self.tenant != SMOKE_TENANT:
            self.say(
                f"note: the check writes into organization {self.tenant}: it redacts its "
                "smoke entries, but their tombstones, its question in the retrieval log and "
                f"its two entries on the growth chart stay there (the default, {SMOKE_TENANT}, "
                "keeps them apart)"
            )
        failed: str | None = None
        try:
            for name, step in steps:
                started = time.monotonic()
                try:
                    detail = step()
                except Exception as exc:  # every failure is the step's, with what was seen
                    took = time.monotonic() - started
                    self.say(f"FAIL {name:<12} {type(exc).__name__}: {exc} ({took:.1f} s)")
                    failed = name
                    break
                took = time.monotonic() - started
                if detail is None:
                    self.say(f"skip {name:<12} ({_why_skipped(name)})")
                else:
                    self.say(f"ok   {name:<12} {detail} ({took:.1f} s)")
        finally:
            self._clean_up()
        if failed is not None:
            self.say(f"smoke check failed at step: {failed}")
            return 1
        self.say("smoke check passed")
        return 0

    def _clean_up(self) -> None:
        """Redact every smoke entry this run wrote, and any an earlier run left: those it
        knows of, then whatever the catalog finds by the smoke title (a write whose reply
        was lost, an incident recorded after its step gave up, an earlier run's). An
        organization lent for the run is then purged, and its keys given back."""
        try:
            if self.admin is not None:
                self._redact_what_was_written()
                if self.lent:
                    self._purge_own_organization()
        finally:
            if self.lent:
                self._give_back_keys()

    def _redact_what_was_written(self) -> None:
        done: list[str] = []
        left = [e for e in self.written if e not in self.redacted]
        try:
            left += [e for e in self._left_by_any_run() if e not in self.redacted and e not in left]
        except Exception as exc:
            self.say(f"cleanup: the catalog could not be searched for smoke entries ({exc})")
        for entry_id in left:
            try:
                self._redact(entry_id)
                done.append(entry_id)
            except Exception as exc:
                self.say(f"cleanup: entry {entry_id} not redacted ({exc}): redact it by hand")
        if done:
            self.say(f"cleanup: redacted {len(done)} smoke entr{'y' if len(done) == 1 else 'ies'}")

    def _purge_own_organization(self) -> None:
        """The run's own organization purged (the admin API's two steps, asked again when
        its confirmation comes too late): every row of it, the tombstones and the logged
        questions too. Never another organization's."""
        if not self.lent or self.tenant != SMOKE_TENANT:
            self.say(f"cleanup: organization {self.tenant} is not the check's: not purged")
            return
        admin = self._admin()
        for attempt in range(1, PURGE_ATTEMPTS + 1):
            try:
                asked = admin.call("POST", "/v1/admin/purge", {"organization": self.tenant})
                done = admin.call(
                    "POST", "/v1/admin/purge/confirmation", {"confirmation": asked["confirmation"]}
                )
            except GrandboHTTPError as exc:
                if exc.status == 400 and attempt < PURGE_ATTEMPTS:
                    continue  # it changed between the two steps: ask again
                self.say(f"cleanup: organization {self.tenant} not purged ({exc})")
                return
            except Exception as exc:
                self.say(f"cleanup: organization {self.tenant} not purged ({exc})")
                return
            rows = sum(int(n) for n in dict(done.get("deleted") or {}).values())
            self.say(f"cleanup: purged organization {self.tenant} ({rows} rows)")
            return

    def _give_back_keys(self) -> None:
        try:
            self.target.give_back(self.tenant)
        except Exception as exc:
            self.say(
                f"cleanup: the keys lent to organization {self.tenant} were not given back "
                f"({exc}): remove them from the keyring by hand"
            )
            return
        self.say(f"cleanup: the keys lent to organization {self.tenant} given back")

    def _left_by_any_run(self) -> list[str]:
        """Active entries titled as smoke entries are (`Smoke check smoke-<hex> ...`)."""
        page = self._admin().call(
            "POST",
            "/v1/admin/catalog",
            {"text": SMOKE_TITLE, "status": "active", "limit": 200},
        )
        return [
            str(entry["entry_id"])
            for entry in page.get("entries") or []
            if _SMOKE_TITLE_RE.match(str(entry.get("title", "")))
            and "smoke check (smoke-" in str(entry.get("summary", ""))
        ]

    # -- helpers ---------------------------------------------------------------------------

    def _redact(self, entry_id: str) -> None:
        self._admin().call(
            "POST",
            f"/v1/admin/entries/{entry_id}/redaction",
            {"reason": f"smoke check {self.marker}: written to be removed"},
            idempotency_key=f"{self.marker}:redact:{entry_id}",
        )
        self.redacted.add(entry_id)

    def _catalog_entry(self) -> dict[str, Any] | None:
        page = self._admin().call(
            "POST", "/v1/admin/catalog", {"text": self.marker, "origin": "incident", "limit": 5}
        )
        entries = page.get("entries") or []
        return entries[0] if entries else None

    @staticmethod
    def _poll(
        within_s: float, probe: Callable[[], dict[str, Any] | None], failure: str
    ) -> dict[str, Any]:
        deadline = time.monotonic() + within_s
        last_error: Exception | None = None
        while True:
            try:
                found = probe()
            except (GrandboHTTPError, OSError) as exc:  # one failed read is no verdict
                if isinstance(exc, GrandboHTTPError) and exc.status < 500:
                    raise
                found, last_error = None, exc
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                seen = f" (last error: {last_error})" if last_error else ""
                raise StepFailedError(failure + seen)
            time.sleep(POLL_S)

    def _admin(self) -> AdminClient:
        if self.admin is None:
            raise StepFailedError("no admin key (the keys step did not run)")
        return self.admin

    def _memory(self) -> MemoryClient:
        if self.memory is None:
            raise StepFailedError("no query key (the keys step did not run)")
        return self.memory

    @staticmethod
    def _id(entry_id: str | None) -> str:
        if entry_id is None:
            raise StepFailedError("no entry of an earlier step")
        return entry_id


def _memory_client(api_url: str, key: SigningKey) -> MemoryClient:
    client = MemoryClient.with_key(api_url, key, ttl_s=900)
    client.timeout = 15
    client.component = "smoke"
    return client


def _why_skipped(step: str) -> str:
    return {
        "reader": "the stage has no reader",
        "alarm topic": "ask for it with --notify",
    }.get(step, "not asked for")


def smoke_incident(tenant: str, incident_id: str, marker: str) -> dict[str, Any]:
    """An incident-closed event of one corroborated finding, marked with the run."""
    now = datetime.now(UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "source": "landfall.incidents",
        "detail-type": "IncidentClosed",
        "account": "000000000000",
        "time": f"{now:%FT%TZ}",
        "region": "local",
        "resources": [],
        "detail": {
            "tenant_id": tenant,
            "incident_id": incident_id,
            "title": f"Smoke check {marker}",
            "closed_at": f"{now:%FT%TZ}",
            "findings": [
                {
                    "finding_id": "f1",
                    "status": "corroborated",
                    "title": f"{SMOKE_TITLE} {marker} incident finding",
                    "summary": f"A deploy's smoke check ({marker}) closed this incident to show "
                    "that corroborated findings become memory; the check redacts it.",
                    "tags": ["smoke"],
                }
            ],
        },
    }
