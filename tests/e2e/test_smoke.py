"""Issue 35, point 7: `grandbo smoke` passes against the local runner (the same edge
contract, the local door for the event) and fails naming the step when one part is
broken, one part at a time; it cleans up what it wrote either way. The stage's side
(its outputs, its keyring, its bus and its alarm topic) runs against moto.

Issue 44, point 3: `grandbo smoke --local` writes into an organization of its own, lent
for the run through the runner's keyring file and purged at its end: the demo
organization's entries, retrievals and growth are the same before and after it, and no
organization keeps anything of the check."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from grandbo.api.auth import Keyring, SigningKey, keyring_document, new_secret
from grandbo.api.client import AdminClient, MemoryClient
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository.purge import OrganizationPurge
from grandbo.smoke.organization import SMOKE_TENANT
from grandbo.smoke.steps import SmokeRun, smoke_incident
from grandbo.smoke.targets import AwsStage, LocalRunner, SmokeTargetError
from grandbo.storage.connections import DatabaseUrls, connect

from .conftest import Gateway, start_gateway, stop_runner

LESSON = {
    "title": "Connection pool exhausted by a retry storm",
    "summary": "Checkout retried every failed call at once and exhausted the database pool.",
}
ASKED = "checkout requests time out because the database connection pool is exhausted"


def _pump_in_background(gateway: Gateway) -> threading.Event:
    """The runner's embed pump in a thread, as `grandbo serve` runs it; set to stop."""
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            if not gateway.pump.pump_once():
                time.sleep(0.02)

    threading.Thread(target=pump, daemon=True).start()
    return stop


@pytest.fixture
def pumping(gateway: Gateway) -> Iterator[Gateway]:
    stop = _pump_in_background(gateway)
    yield gateway
    stop.set()


def _runner(gateway: Gateway, **changes: Any) -> LocalRunner:
    keys = dict(gateway.keys)
    keys.update(changes.pop("keys", {}))
    return LocalRunner(
        f"http://{gateway.host}:{gateway.port}",
        Keyring(list(keys.values())),
        changes.pop("door_key", gateway.door_key),
        **changes,
    )


def _smoke(target: Any, tenant: str, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    code = SmokeRun(target, tenant=tenant, out=out, **kw).run()
    return code, out.getvalue()


def _smoke_entries(gateway: Gateway, tenant: str, status: str) -> list[dict[str, Any]]:
    page = gateway.admin(
        tenant, "POST", "/v1/admin/catalog", {"text": "smoke-", "status": status, "limit": 50}
    )
    assert page.status == 200, page.body
    return list(page.body["entries"])


def test_the_smoke_check_passes_against_the_local_runner_and_leaves_nothing(
    pumping: Gateway, tenant: str
) -> None:
    code, printed = _smoke(_runner(pumping), tenant, embed_within_s=30)
    assert code == 0, printed
    for step in ("keys", "query", "admin write", "admin read", "incident", "embedded"):
        assert f"ok   {step}" in printed, (step, printed)
    assert "ok   redaction" in printed
    assert "skip reader" in printed  # no reader locally
    assert "skip alarm topic" in printed  # not asked for
    assert "smoke check passed" in printed
    # each step says how long it took
    assert all(line.rstrip().endswith(" s)") for line in printed.splitlines() if "ok " in line)
    # nothing of it stays readable: the admin entry and the incident's, both redacted
    assert _smoke_entries(pumping, tenant, "active") == []
    assert "cleanup: redacted 1 smoke entry" in printed  # the incident's


AdminCall = Callable[[str, str, "dict[str, Any] | None"], dict[str, Any]]


def _what_it_shows(admin: AdminCall) -> dict[str, Any]:
    """What a person sees of an organization: its entries (as the catalog lists them), its
    retrieval log (every question, the unanswered ones, the incidents page) and its
    growth chart."""
    entries = admin("POST", "/v1/admin/catalog", {"limit": 200})["entries"]
    return {
        "entries": [(e["entry_id"], e["revision"], e["status"], e["title"]) for e in entries],
        "retrievals": admin("POST", "/v1/admin/retrievals", {"limit": 200}),
        "unanswered": admin("POST", "/v1/admin/retrievals", {"unanswered": True, "limit": 200}),
        "incidents": admin("POST", "/v1/admin/retrievals/incidents", {"limit": 50}),
        "growth": admin("GET", "/v1/admin/growth", None),
    }


def _through_gateway(gateway: Gateway, tenant: str) -> AdminCall:
    def admin(method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        reply = gateway.admin(tenant, method, path, body)
        assert reply.status == 200, (path, reply.body)
        return dict(reply.body)

    return admin


def _rows_left(database: DatabaseUrls, tenant: str) -> dict[str, int]:
    """The tables that still hold a row of the organization, and how many."""
    conn = connect(database.app)
    try:
        counts = OrganizationPurge(conn).organization_rows(tenant)
    finally:
        conn.close()
    return {table: n for table, n in counts.items() if n}


@pytest.fixture
def filed_gateway(
    database: DatabaseUrls, tenant: str, provider: FakeEmbeddingProvider, tmp_path: Path
) -> Iterator[tuple[Gateway, Path]]:
    """A runner reading its keyring from a file, as `grandbo serve` does, pumping."""
    keyring = tmp_path / "keyring.json"
    gateway, server = start_gateway(database, (tenant,), provider, keyring_file=keyring)
    stop = _pump_in_background(gateway)
    yield gateway, keyring
    stop.set()
    stop_runner(server)


def test_the_local_check_lends_its_own_organization_and_leaves_nothing(
    filed_gateway: tuple[Gateway, Path], database: DatabaseUrls, tenant: str
) -> None:
    gateway, keyring = filed_gateway
    # Given an organization with memory and a question of its own
    created = gateway.admin(tenant, "POST", "/v1/admin/entries", LESSON)
    assert created.status == 201, created.body
    assert gateway.query(tenant, {"topic": ASKED}).status == 200
    before = _what_it_shows(_through_gateway(gateway, tenant))
    assert before["retrievals"]["retrievals"], "the organization's own question is logged"
    key_ids = {key.key_id for key in Keyring.from_json(keyring.read_text()).signing_keys()}
    # When the check runs in the smoke organization, lent through the runner's keyring file
    runner = _runner(gateway, keyring_file=keyring)
    code, printed = _smoke(runner, SMOKE_TENANT, embed_within_s=30)
    # Then it passed there, purged that organization and gave its keys back
    assert code == 0, printed
    assert f"for {SMOKE_TENANT}, lent for this run" in printed
    assert f"cleanup: purged organization {SMOKE_TENANT} (" in printed, printed
    assert f"cleanup: the keys lent to organization {SMOKE_TENANT} given back" in printed
    assert "note:" not in printed  # it wrote where it says: nowhere to warn about
    assert _rows_left(database, SMOKE_TENANT) == {}
    held = {key.key_id for key in Keyring.from_json(keyring.read_text()).signing_keys()}
    assert held == key_ids
    # and the other organization shows exactly what it showed before
    assert _what_it_shows(_through_gateway(gateway, tenant)) == before


def test_a_check_told_another_organization_says_what_it_leaves_there(
    pumping: Gateway, tenant: str
) -> None:
    code, printed = _smoke(_runner(pumping), tenant, embed_within_s=30)
    assert code == 0, printed
    assert f"note: the check writes into organization {tenant}:" in printed
    assert "tombstones" in printed
    assert "purged" not in printed  # never another organization's


def test_an_organization_without_keys_fails_the_keys_step_naming_those_with_keys(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    code, printed = _smoke(_runner(gateway), "nosuch-org")
    assert code == 1
    assert "FAIL keys" in printed
    assert "no admin key for organization 'nosuch-org'" in printed
    # the organizations it holds keys of
    assert tenant in printed
    assert other_tenant in printed
    assert printed.strip().endswith("smoke check failed at step: keys")


def _wrong(gateway: Gateway, label: str) -> dict[str, SigningKey]:
    """The keyring's key `label` with another secret: the stage no longer knows it."""
    return {label: gateway.keys[label].model_copy(update={"secret": new_secret()})}


@pytest.mark.parametrize(
    ("broken", "failing"),
    [
        ("query key", "query"),
        ("admin key", "admin write"),
        ("door key", "incident"),
        ("embedding", "embedded"),
        ("reader", "reader"),
    ],
)
def test_a_broken_part_fails_its_own_step_and_the_check_cleans_up(
    gateway: Gateway, tenant: str, broken: str, failing: str
) -> None:
    # with the embedding broken, nothing embeds the entries
    stop = _pump_in_background(gateway) if broken != "embedding" else threading.Event()
    changes: dict[str, Any] = {
        "query key": {"keys": _wrong(gateway, f"{tenant}-query")},
        "admin key": {"keys": _wrong(gateway, f"{tenant}-admin")},
        "door key": {"door_key": new_secret()},
        "embedding": {},
        "reader": {"has_reader": True},
    }[broken]
    try:
        code, printed = _smoke(
            _runner(gateway, **changes), tenant, embed_within_s=2, incident_within_s=5
        )
    finally:
        stop.set()
    assert code == 1, printed
    assert f"FAIL {failing}" in printed, printed
    assert printed.strip().endswith(f"smoke check failed at step: {failing}")
    assert [line for line in printed.splitlines() if line.startswith("FAIL")] == [
        next(line for line in printed.splitlines() if line.startswith("FAIL"))
    ]  # the first failure ends the run
    assert _smoke_entries(gateway, tenant, "active") == []  # what it wrote is redacted


@pytest.fixture
def aws(aws_credentials: None) -> Iterator[None]:
    with mock_aws():
        yield


def test_the_alarm_topic_step_publishes_a_test_message_or_names_the_failure(
    pumping: Gateway, tenant: str, aws: None
) -> None:
    topic = boto3.client("sns").create_topic(Name="grandbo-alarms")["TopicArn"]
    code, printed = _smoke(
        _runner(pumping, alarm_topic_arn=topic), tenant, notify=True, embed_within_s=30
    )
    assert code == 0, printed
    assert "ok   alarm topic  test message" in printed
    gone = topic.replace("grandbo-alarms", "no-such-topic")
    code, printed = _smoke(
        _runner(pumping, alarm_topic_arn=gone), tenant, notify=True, embed_within_s=30
    )
    assert code == 1
    assert printed.strip().endswith("smoke check failed at step: alarm topic")


def _stack(keyring: str, *, outputs: dict[str, str]) -> dict[str, Any]:
    return {
        "Resources": {"Placeholder": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {name: {"Value": value} for name, value in outputs.items()},
    }


def test_a_stage_is_read_from_its_stack_and_reached_through_its_bus_and_topic(
    aws: None, tenant: str
) -> None:
    keys = [
        SigningKey(key_id="smoke-admin", tenant_id=tenant, secret=new_secret(), roles=["admin"]),
        SigningKey(key_id="smoke-query", tenant_id=tenant, secret=new_secret(), roles=["query"]),
    ]
    secret = boto3.client("secretsmanager").create_secret(
        Name="keyring", SecretString=keyring_document(keys)
    )["ARN"]
    events, sqs, sns = boto3.client("events"), boto3.client("sqs"), boto3.client("sns")
    events.create_event_bus(Name="grandbo-dev-incidents")
    queue = sqs.create_queue(QueueName="incident-queue")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    # the stage's rule, with its pattern (infra/messaging.py), onto a queue to read it back
    events.put_rule(
        Name="incident-closed",
        EventBusName="grandbo-dev-incidents",
        EventPattern=json.dumps(
            {"source": ["landfall.incidents"], "detail-type": ["IncidentClosed"]}
        ),
    )
    events.put_targets(
        Rule="incident-closed",
        EventBusName="grandbo-dev-incidents",
        Targets=[{"Id": "queue", "Arn": queue_arn}],
    )
    topic = sns.create_topic(Name="alarms")["TopicArn"]
    outputs = {
        "ApiUrl": "https://api.example/prod/",
        "KeyringSecretArn": secret,
        "IncidentBusName": "grandbo-dev-incidents",
        "AlarmTopicArn": topic,
        "ReadsScaleOut": "true",
    }
    cfn = boto3.client("cloudformation")
    cfn.create_stack(
        StackName="Grandbo-dev", TemplateBody=json.dumps(_stack(secret, outputs=outputs))
    )
    stage = AwsStage("dev")
    assert stage.api_url == "https://api.example/prod"
    assert stage.has_reader
    # a real Titan vector's embed_rev passes the embedded step's check
    from grandbo.embedding.titan import TitanEmbeddingProvider

    assert stage.embed_rev_prefix is not None
    assert TitanEmbeddingProvider(client=object()).embed_rev.startswith(stage.embed_rev_prefix)
    admin, query = stage.keys(tenant)
    assert (admin.key_id, query.key_id) == ("smoke-admin", "smoke-query")
    event = smoke_incident(tenant, "SMOKE-1", "smoke-1")
    assert "grandbo-dev-incidents" in stage.put_incident(event)
    (message,) = sqs.receive_message(QueueUrl=queue).get("Messages", [])
    delivered = json.loads(message["Body"])
    assert delivered["detail"] == event["detail"]  # what the incident function parses
    assert stage.notify("subject", "message")
    # a stack without an output the check needs is named
    cfn.create_stack(
        StackName="Grandbo-old",
        TemplateBody=json.dumps(
            _stack(secret, outputs={k: v for k, v in outputs.items() if k != "ReadsScaleOut"})
        ),
    )
    with pytest.raises(SmokeTargetError, match="no output ReadsScaleOut"):
        AwsStage("old")
    with pytest.raises(SmokeTargetError, match="Grandbo-nowhere"):
        AwsStage("nowhere")
    with pytest.raises(SmokeTargetError, match="no admin key for organization 'other'"):
        stage.keys("other")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_command_passes_against_grandbo_serve(tmp_path: Path) -> None:
    """`grandbo smoke --local` against `grandbo serve` as processes, as README runs them;
    the demo organization shows the same entries, retrievals and growth before and after
    it, and no organization is left of the check (issue 44, point 3)."""
    port = _port()
    cli = [sys.executable, "-m", "grandbo.cli", "--data-dir", str(tmp_path), "--provider", "fake"]
    server = subprocess.Popen(  # noqa: S603 - our own CLI
        [*cli, "serve", "--port", str(port), "--containers", "2", "--console-port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "local-doors.key").exists() or not _listening(port):
            assert server.poll() is None, "grandbo serve exited"
            assert time.monotonic() < deadline, "grandbo serve did not start"
            time.sleep(0.3)
        url = f"http://127.0.0.1:{port}"
        keyring = Keyring.from_json((tmp_path / "keyring.json").read_text())
        demo = AdminClient(url, keyring.find("demo-admin", "admin"), timeout=30)
        # the demo organization asked a question of its own (its retrieval log is not empty)
        MemoryClient.with_key(url, keyring.find("demo-beacon", "query")).query_org_memory(ASKED)
        before = _what_it_shows(demo.call)
        assert before["retrievals"]["retrievals"]
        done = subprocess.run(  # noqa: S603 - our own CLI
            [*cli, "smoke", "--local", "--url", f"http://127.0.0.1:{port}", "--embed-within", "60"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={**os.environ},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "smoke check passed" in done.stdout
        assert f"cleanup: purged organization {SMOKE_TENANT} (" in done.stdout, done.stdout
        # the demo organization is as it was: no tombstone, question or growth of the check
        assert _what_it_shows(demo.call) == before
        # and no organization is left of the check: its keys are out of the keyring and
        # the store has no memory of it
        held = Keyring.from_json((tmp_path / "keyring.json").read_text()).signing_keys()
        assert {key.tenant_id for key in held} == {"demo"}
        gone = subprocess.run(  # noqa: S603 - our own CLI
            [*cli, "retrievals", "--tenant", SMOKE_TENANT],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert gone.returncode == 1, gone.stdout + gone.stderr
        assert gone.stderr.startswith(
            f"grandbo: no organization '{SMOKE_TENANT}' (organizations: demo);"
        ), gone.stderr
        # the runner is down: the first step that needs it names itself
        server.terminate()
        server.wait(30)
        down = subprocess.run(  # noqa: S603 - our own CLI
            [*cli, "smoke", "--local", "--url", f"http://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert down.returncode == 1
        assert down.stdout.strip().endswith("smoke check failed at step: query")
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(30)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_the_cleanup_finds_what_a_step_could_not_report(
    pumping: Gateway, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create whose reply was lost, and an earlier run's entry that arrived after its
    step gave up: the cleanup redacts both (by the smoke title), and nothing else."""
    from grandbo.api.client import AdminClient

    real = pumping.admin(
        tenant,
        "POST",
        "/v1/admin/entries",
        {
            "title": "Smoke check of the fire alarms in the data center",
            "summary": "The facilities team tested the smoke detectors in hall B; no alert "
            "reached the on-call because the pager bridge was down.",
        },
    )
    assert real.status == 201, real.body
    earlier = smoke_incident(tenant, "SMOKE-earlier", "smoke-0123456789")
    assert pumping.publish(earlier).status == 200  # a late delivery of an earlier run
    create = AdminClient.create_entry

    def lost_reply(self: AdminClient, *args: Any, **kw: Any) -> Any:
        create(self, *args, **kw)
        raise TimeoutError("the reply was lost")

    monkeypatch.setattr(AdminClient, "create_entry", lost_reply)
    code, printed = _smoke(_runner(pumping), tenant, embed_within_s=30)
    assert code == 1
    assert "FAIL admin write" in printed
    assert "cleanup: redacted 2 smoke entries" in printed, printed
    assert _smoke_entries(pumping, tenant, "active") == []
    # the real entry whose title begins alike is no smoke entry: untouched
    still = pumping.admin(tenant, "GET", f"/v1/admin/entries/{real.body['entry']['entry_id']}")
    assert still.status == 200
    assert still.body["status"] == "active"


def test_a_real_organization_named_like_the_smoke_one_is_never_written_nor_purged(
    tmp_path: Path,
) -> None:
    """Issue 44's review: an organization called grandbo-smoke that has keys of its own (a
    person's) is someone's: the check refuses it instead of purging it."""
    from grandbo.api.auth import Keyring, SigningKey, new_secret
    from grandbo.smoke.organization import SMOKE_TENANT, RunInProgressError, hold_run_lock
    from grandbo.smoke.targets import LocalRunner, SmokeTargetError

    owner = SigningKey(
        key_id="person-ops",
        tenant_id=SMOKE_TENANT,
        secret=new_secret(),
        roles=["admin"],
        person="ops@example.com",
        person_role="admin",
    )
    keyring_file = tmp_path / "keyring.json"
    keyring_file.write_text(json.dumps({"keys": [owner.model_dump(mode="json")]}))
    runner = LocalRunner("http://127.0.0.1:1", Keyring([owner]), "door", keyring_file=keyring_file)
    with pytest.raises(SmokeTargetError, match="has keys of its own"):
        runner.keys(SMOKE_TENANT)
    assert json.loads(keyring_file.read_text())["keys"][0]["key_id"] == "person-ops"

    # and two runs on one data directory: the second waits for nothing, it is refused
    first = hold_run_lock(tmp_path)
    try:
        with pytest.raises(RunInProgressError, match="another grandbo smoke --local"):
            hold_run_lock(tmp_path)
    finally:
        first.close()
    hold_run_lock(tmp_path).close()  # free again once the first ended
