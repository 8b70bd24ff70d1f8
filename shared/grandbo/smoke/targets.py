"""Where a smoke check runs: a deployed stage (its stack's outputs, with the operator's AWS
credentials) or a local runner (`grandbo serve`: the same edge contract, the local door
for the event, and the smoke organization's keys lent through its keyring file)."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from grandbo.api.auth import Keyring, SigningKey
from grandbo.api.client import user_agent
from grandbo.errors import GrandboError
from grandbo.smoke.organization import (
    SMOKE_TENANT,
    RunInProgressError,
    hold_run_lock,
    lend_keys,
    lent,
    take_back_keys,
)

# every Titan embedding model's id, which begins a Titan vector's embed_rev
TITAN_EMBED_PREFIX = "amazon.titan-embed"
# the stack's outputs a smoke check reads (infra/stack.py)
OUTPUTS = ("ApiUrl", "KeyringSecretArn", "IncidentBusName", "AlarmTopicArn", "ReadsScaleOut")


class SmokeTargetError(GrandboError):
    """The target cannot be reached or is not what a smoke check needs."""


class Target(Protocol):
    """What the steps need of a stage."""

    name: str
    api_url: str
    has_reader: bool
    # the embedding model a stage's vectors must come from (Titan in AWS), or None
    embed_rev_prefix: str | None

    def keys(self, tenant: str) -> tuple[SigningKey, SigningKey]:
        """The tenant's (admin, query) signing keys."""
        ...

    def lends(self, tenant: str) -> bool:
        """Whether `keys` lends the organization for one run (the check's own, made for
        it): the run then purges it and gives its keys back."""
        ...

    def give_back(self, tenant: str) -> None:
        """The keys `keys` lent taken out again (nothing when it lent none)."""
        ...

    def put_incident(self, event: dict[str, Any]) -> str:
        """Deliver an incident-closed event as the incident platform does; what was done."""
        ...

    def notify(self, subject: str, message: str) -> str:
        """A test message to the alarm topic's subscribers; its message id."""
        ...


def keys_of(keyring: Keyring, tenant: str) -> tuple[SigningKey, SigningKey]:
    """The first admin and the first query key of `tenant` in the keyring."""
    admin = [k for k in keyring.signing_keys() if k.tenant_id == tenant and "admin" in k.roles]
    query = [k for k in keyring.signing_keys() if k.tenant_id == tenant and "query" in k.roles]
    if not admin or not query:
        held = sorted({key.tenant_id for key in keyring.signing_keys()})
        raise SmokeTargetError(
            f"the keyring holds no {'admin' if not admin else 'query'} key for organization "
            f"{tenant!r} (it holds keys of: {', '.join(held) or 'none'}): add one "
            "(docs/OPERATIONS.md, 'Onboard an organization') or name another with --tenant"
        )
    return admin[0], query[0]


@dataclass
class AwsStage:
    """A deployed stage: `Grandbo-<stage>`'s outputs; the keyring from Secrets Manager, the
    event on the stage's bus, the test message on its alarm topic."""

    stage: str
    region: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    _clients: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = f"Grandbo-{self.stage}"
        try:
            stacks = self._client("cloudformation").describe_stacks(StackName=self.name)
        except Exception as exc:
            raise SmokeTargetError(f"stack {self.name}: {exc}") from exc
        (stack,) = stacks["Stacks"]
        self.outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        missing = [name for name in OUTPUTS if name not in self.outputs]
        if missing:
            raise SmokeTargetError(f"stack {self.name} has no output {', '.join(missing)}")
        self.api_url = self.outputs["ApiUrl"].rstrip("/")
        self.has_reader = self.outputs["ReadsScaleOut"] == "true"
        # a Titan vector's embed_rev begins with its model id (amazon.titan-embed-...)
        self.embed_rev_prefix: str | None = TITAN_EMBED_PREFIX

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            from grandbo.aws_clients import OPERATOR, client

            self._clients[service] = client(service, region=self.region, bounds=OPERATOR)
        return self._clients[service]

    def keys(self, tenant: str) -> tuple[SigningKey, SigningKey]:
        secret = self._client("secretsmanager").get_secret_value(
            SecretId=self.outputs["KeyringSecretArn"]
        )
        return keys_of(Keyring.from_json(secret["SecretString"]), tenant)

    def lends(self, tenant: str) -> bool:
        return False  # a stage's keys are the operator's, kept in its keyring secret

    def give_back(self, tenant: str) -> None:
        return None

    def put_incident(self, event: dict[str, Any]) -> str:
        bus = self.outputs["IncidentBusName"]
        answer = self._client("events").put_events(
            Entries=[
                {
                    "EventBusName": bus,
                    "Source": event["source"],
                    "DetailType": event["detail-type"],
                    "Detail": json.dumps(event["detail"]),
                }
            ]
        )
        if answer.get("FailedEntryCount"):
            failed = answer["Entries"][0]
            raise SmokeTargetError(
                f"EventBridge refused the event: {failed.get('ErrorCode')} "
                f"{failed.get('ErrorMessage')}"
            )
        return f"put on bus {bus} (event {answer['Entries'][0]['EventId']})"

    def notify(self, subject: str, message: str) -> str:
        answer = self._client("sns").publish(
            TopicArn=self.outputs["AlarmTopicArn"], Subject=subject, Message=message
        )
        return str(answer["MessageId"])


@dataclass
class LocalRunner:
    """`grandbo serve` on this machine: its URL, its keyring and its doors' key. With the
    runner's keyring file, the smoke organization is lent for the run: its keys written
    into the file (the runner reads it again at its next request), taken out at the end."""

    api_url: str
    keyring: Keyring
    door_key: str
    has_reader: bool = False
    alarm_topic_arn: str | None = None  # moto's or a real topic, for --notify
    region: str | None = None
    keyring_file: Path | None = None

    def __post_init__(self) -> None:
        self.api_url = self.api_url.rstrip("/")
        self.name = f"local runner at {self.api_url}"
        self.embed_rev_prefix: str | None = None
        self._lock: IO[bytes] | None = None

    @classmethod
    def from_data_dir(cls, api_url: str, data_dir: Path, **kw: Any) -> LocalRunner:
        try:
            keyring = Keyring.from_json((data_dir / "keyring.json").read_text())
            door_key = (data_dir / "local-doors.key").read_text().strip()
        except OSError as exc:
            raise SmokeTargetError(
                f"no local runner's keys in {data_dir} ({exc}): start it with `make run`"
            ) from exc
        return cls(api_url, keyring, door_key, keyring_file=data_dir / "keyring.json", **kw)

    def keys(self, tenant: str) -> tuple[SigningKey, SigningKey]:
        lent_through = self._lent_through(tenant)
        if lent_through is None:
            return keys_of(self.keyring, tenant)
        owned = [
            k.key_id for k in self.keyring.signing_keys() if k.tenant_id == tenant and not lent(k)
        ]
        if owned:  # someone's organization by that name: never the check's to purge
            raise SmokeTargetError(
                f"organization {tenant!r} has keys of its own ({', '.join(sorted(owned))}): "
                "it is not the smoke check's to write into and purge; pass --tenant"
            )
        try:
            self._lock = hold_run_lock(lent_through.parent)
        except RunInProgressError as exc:
            raise SmokeTargetError(str(exc)) from exc
        try:
            return lend_keys(lent_through)
        except (OSError, GrandboError) as exc:
            raise SmokeTargetError(
                f"the smoke organization's keys could not be lent through {lent_through}: {exc}"
            ) from exc

    def lends(self, tenant: str) -> bool:
        return self._lent_through(tenant) is not None

    def give_back(self, tenant: str) -> None:
        lent_through = self._lent_through(tenant)
        if lent_through is not None:
            take_back_keys(lent_through)
        if self._lock is not None:
            self._lock.close()  # the run's lock, released
            self._lock = None

    def _lent_through(self, tenant: str) -> Path | None:
        """The keyring file the smoke organization's keys are lent through, or None."""
        return self.keyring_file if tenant == SMOKE_TENANT else None

    def put_incident(self, event: dict[str, Any]) -> str:
        request = urllib.request.Request(  # noqa: S310 - the runner's own URL
            f"{self.api_url}/local/events",
            data=json.dumps(event).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.door_key}",
                "User-Agent": user_agent("smoke"),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                json.loads(answer.read())
        except Exception as exc:
            raise SmokeTargetError(f"the local door refused the event: {exc}") from exc
        return "delivered through the local door /local/events"

    def notify(self, subject: str, message: str) -> str:
        if self.alarm_topic_arn is None:
            raise SmokeTargetError("no alarm topic here: name one with --alarm-topic-arn")
        from grandbo.aws_clients import OPERATOR, client

        answer = client("sns", region=self.region, bounds=OPERATOR).publish(
            TopicArn=self.alarm_topic_arn, Subject=subject, Message=message
        )
        return str(answer["MessageId"])
