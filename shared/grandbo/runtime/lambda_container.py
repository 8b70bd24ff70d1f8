"""What one Lambda container holds: validated environment, one connection, one service.

The environment is validated at cold start. The connection is created lazily, reused
across invocations, health-checked before use (closed, broken, left inside a transaction
by a failed request, or idle too long → a ping, then a reconnect) and kept per thread.
The local runner serves requests on many threads through `container()`: a bounded pool
of "containers" (each one connection and its services), so concurrency never opens more
connections than the pool holds and no two requests share a transaction.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from grandbo.api.auth import Keyring, KeyringFile
from grandbo.api.nonces import NonceStore
from grandbo.embedding.base import EmbeddingProvider
from grandbo.embedding.factory import PROVIDER_SPEC, provider_named
from grandbo.embedding.rerank import RERANKER_SPEC, Reranker, reranker_named
from grandbo.errors import GrandboError, InvalidInputError, RateLimitedError, StoreUnavailableError
from grandbo.memory.domain.embed_queue import EmbedQueue
from grandbo.memory.domain.models import IncidentId, MemoryQueryResult
from grandbo.memory.domain.retrieval_log import RetrievalRecord
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.runtime import after_answer
from grandbo.runtime.admission import SlidingMinute
from grandbo.runtime.incident_queue import SqsIncidentQueue
from grandbo.runtime.retrieval_writer import DURABLE_WAIT_S, GATHER_S, RetrievalWriter
from grandbo.runtime.sqs_queue import SqsEmbedQueue
from grandbo.storage.connections import connect, in_recovery, is_idle
from grandbo.topology.repository import TopologyRepository
from grandbo.topology.service import TopologyService

if TYPE_CHECKING:
    from grandbo.api.iam_people import IamPeople

IDLE_PING_AFTER_S = 60.0
KEYRING_CACHE_S = 300

_log = logging.getLogger(__name__)
# a reader (RDS Proxy's read-only endpoint) that does not connect this fast is skipped;
# one that could not be reached is tried again after this long
READER_CONNECT_TIMEOUT_S = 2
READER_RETRY_AFTER_S = 30.0


_INCIDENT_ID: TypeAdapter[str | None] = TypeAdapter(IncidentId | None)


def _check_incident_id(incident_id: str | None) -> str | None:
    """The incident id as every stored one is (grandbo.memory.domain.models.IncidentId, stripped
    as a verdict's is, so a verdict ties to the questions of its incident); InvalidInputError
    for one the retrieval log could not store faithfully."""
    stripped = incident_id.strip() if isinstance(incident_id, str) else incident_id
    try:
        _INCIDENT_ID.validate_python(stripped)
    except ValidationError as exc:
        raise InvalidInputError("incident_id", exc.errors()[0]["msg"]) from exc
    return stripped


def _in_lambda() -> bool:
    """In a Lambda execution environment (which freezes after each answer)."""
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


class ContainersBusyError(GrandboError):
    """Every container of the pool stayed busy for the whole wait (maps to 503; retry)."""


class LambdaEnvironment(BaseModel):
    """The environment every Grandbo function reads; one of the database settings is needed."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    database_secret_arn: str | None = Field(default=None, alias="GRANDBO_DB_SECRET_ARN")
    # RDS Proxy's endpoint: the secret names the cluster, connections go through the proxy
    database_host: str | None = Field(default=None, alias="GRANDBO_DB_HOST")
    # where a query's searches go (reads scale out): the proxy's read-only endpoint in AWS,
    # or a read-only URL; unset, every statement goes to the one database
    database_read_host: str | None = Field(default=None, alias="GRANDBO_DB_READ_HOST")
    database_read_url: str | None = Field(default=None, alias="DATABASE_READ_URL")
    provider: str = Field(
        default="titan", alias="GRANDBO_EMBEDDING_PROVIDER", pattern=PROVIDER_SPEC
    )
    # during a model change: the model tenants are served from until each has switched
    # (blue/green, docs/OPERATIONS.md); unset once every tenant serves the new one
    previous_provider: str | None = Field(
        default=None, alias="GRANDBO_PREVIOUS_EMBEDDING_PROVIDER", pattern=PROVIDER_SPEC
    )
    embed_queue_url: str | None = Field(default=None, alias="GRANDBO_EMBED_QUEUE_URL")
    # the incident function's queue (its back-offs) and dead-letter queue (what it refuses)
    incident_queue_url: str | None = Field(default=None, alias="GRANDBO_INCIDENT_QUEUE_URL")
    incident_dlq_url: str | None = Field(default=None, alias="GRANDBO_INCIDENT_DLQ_URL")
    keyring_secret_arn: str | None = Field(default=None, alias="GRANDBO_KEYRING_SECRET_ARN")
    keyring_file: str | None = Field(default=None, alias="GRANDBO_KEYRING_FILE")
    # which IAM Identity Center permission sets stand for which organization and role
    # (grandbo.api.iam_people), as the stack keeps them
    iam_people: str | None = Field(default=None, alias="GRANDBO_IAM_PEOPLE")
    topic_embed_timeout_s: float = Field(default=2.0, alias="GRANDBO_TOPIC_EMBED_TIMEOUT_S")
    # the optional reranker stage (off unless a deployment names one: `bedrock:<model ARN>`)
    reranker: str | None = Field(
        default=None, alias="GRANDBO_RERANKER", pattern=f"^off$|{RERANKER_SPEC}"
    )
    rerank_timeout_s: float = Field(default=1.0, alias="GRANDBO_RERANK_TIMEOUT_S", gt=0, le=10)

    @model_validator(mode="after")
    def _one_database(self) -> LambdaEnvironment:
        if not self.database_url and not self.database_secret_arn:
            raise ValueError("set DATABASE_URL or GRANDBO_DB_SECRET_ARN")
        return self

    @classmethod
    def from_environ(cls) -> LambdaEnvironment:
        return cls.model_validate({k: v for k, v in os.environ.items() if v})


# TLS towards RDS Proxy. Its default endpoint (every function's writer) takes verify-full:
# the certificate chains to an Amazon Root CA and names the host. A proxy endpoint you
# create (the read-only endpoint the query function reads from) does not support
# VERIFY_IDENTITY, AWS's RDS Proxy TLS section says
# (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy.howitworks.html#rds-proxy-security.tls):
# every reader connection failed and fell back to the writer. verify-ca still refuses any
# certificate that does not chain to a CA of the bundle (Amazon's roots for ACM).
WRITER_SSLMODE = "verify-full"
READER_SSLMODE = "verify-ca"


def database_url_from_secret(
    secret_string: str,
    host: str | None = None,
    *,
    connect_timeout_s: int | None = None,
    sslmode: str = WRITER_SSLMODE,
) -> str:
    """An RDS-style secret (host, port, username, password, dbname) as a connection URL.

    TLS is verify-full unless told (the reader's endpoint: READER_SSLMODE): the server's
    certificate must chain to a CA of certifi's bundle and name `host`. Every function
    connects through RDS Proxy (`host`), whose certificate ACM issues under the Amazon
    Root CAs that bundle carries.
    """
    import certifi
    from psycopg.conninfo import make_conninfo

    secret = json.loads(secret_string)
    return make_conninfo(
        "",
        host=host or secret["host"],
        port=str(secret.get("port", 5432)),
        user=secret["username"],
        password=secret["password"],
        dbname=secret.get("dbname", "postgres"),
        sslmode=sslmode,
        sslrootcert=certifi.where(),
        **({} if connect_timeout_s is None else {"connect_timeout": str(connect_timeout_s)}),
    )


@dataclass
class _Slot:
    conn: psycopg.Connection[Any] | None = None
    read_conn: psycopg.Connection[Any] | None = None
    used_at: float = 0.0
    read_used_at: float = 0.0
    # whether read_conn is served by a replica (pg_is_in_recovery, asked once per connection)
    read_on_replica: bool = False
    # where this request's searches ran: "reader", "writer", or None before any search
    read_from: str | None = None
    service: MemoryService | None = None
    topology: TopologyService | None = None
    nonces: NonceStore | None = None
    # the writer's connection was checked in this request (`writer`): used as it is until
    # the next request, never checked between the statements of one unit of work
    writer_checked: bool = False


class LambdaRuntime:
    """Per-container state, with overrides for the local runner and the tests."""

    def __init__(
        self,
        environment: LambdaEnvironment | None = None,
        *,
        provider: EmbeddingProvider | None = None,
        embed_queue: EmbedQueue | None = None,
        keyring: Keyring | None = None,
        containers: int | None = None,
        previous_provider: EmbeddingProvider | None = None,
        incident_queue: SqsIncidentQueue | None = None,
    ) -> None:
        self._environment = environment
        self._provider = provider
        self._previous_provider = previous_provider
        self._reranker: Reranker | None = None
        self._reader_down_until = 0.0
        # each caller's questions per sliding minute, counted in this process (every door
        # and container of it): no statement, no writer (grandbo.runtime.admission)
        self.admission = SlidingMinute()
        self._queue = embed_queue
        self._incident_queue = incident_queue
        self._retrievals: RetrievalWriter | None = None
        self._keyring = keyring
        self._keyring_loaded_at = 0.0
        self._keyring_file: KeyringFile | None = None
        self._iam_people: IamPeople | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[psycopg.Connection[Any]] = []
        # with `containers`, requests borrow one of that many slots (see `container`)
        self._idle: queue.Queue[_Slot] | None = None
        if containers is not None:
            self._idle = queue.Queue()
            for _ in range(containers):
                self._idle.put(_Slot())

    @property
    def environment(self) -> LambdaEnvironment:
        if self._environment is None:
            self._environment = LambdaEnvironment.from_environ()
        return self._environment

    @property
    def provider(self) -> EmbeddingProvider:
        with self._lock:
            if self._provider is None:
                self._provider = provider_named(self.environment.provider)
            return self._provider

    @property
    def previous_provider(self) -> EmbeddingProvider | None:
        with self._lock:
            name = self.environment.previous_provider
            if self._previous_provider is None and name is not None:
                self._previous_provider = provider_named(name)
            return self._previous_provider

    @property
    def reranker(self) -> Reranker | None:
        """The configured reranker (one per container), or None."""
        with self._lock:
            if self._reranker is None and self.environment.reranker not in (None, "off"):
                self._reranker = reranker_named(self.environment.reranker)
            return self._reranker

    @property
    def embed_queue(self) -> EmbedQueue | None:
        if self._queue is None and self.environment.embed_queue_url:
            self._queue = SqsEmbedQueue(self.environment.embed_queue_url)
        return self._queue

    @property
    def incident_queue(self) -> SqsIncidentQueue | None:
        """The incident queue's back-off and dead letters, where the environment names both."""
        env = self.environment
        if self._incident_queue is None and env.incident_queue_url and env.incident_dlq_url:
            self._incident_queue = SqsIncidentQueue(env.incident_queue_url, env.incident_dlq_url)
        return self._incident_queue

    def _database_url(self, *, reader: bool = False) -> str:
        env = self.environment
        if reader and env.database_read_url:
            return env.database_read_url
        if env.database_url:
            return env.database_url
        from grandbo.runtime.secrets import secret_value

        assert env.database_secret_arn is not None
        secret = secret_value(env.database_secret_arn)
        if reader:  # a reader that does not answer soon is skipped: the writer answers
            return database_url_from_secret(
                secret,
                env.database_read_host,
                connect_timeout_s=READER_CONNECT_TIMEOUT_S,
                sslmode=READER_SSLMODE,
            )
        return database_url_from_secret(secret, env.database_host)

    @property
    def reads_scale_out(self) -> bool:
        """Whether queries search a reader (a connection of their own) instead of the writer."""
        env = self.environment
        return bool(env.database_read_url or (env.database_read_host and not env.database_url))

    def connection(self) -> psycopg.Connection[Any]:
        """This container's connection to the writer (every write, and reads that must see
        them)."""
        slot: _Slot = self._slot()
        conn = self._live(slot.conn, slot.used_at)
        if conn is None:
            slot.conn = conn = self._connect(self._database_url())
            slot.nonces = None  # the service and topology resolve the writer at each use
        slot.used_at = time.monotonic()
        return conn

    def read_connection(self) -> psycopg.Connection[Any]:
        """This container's connection to a reader, when reads scale out (else the
        writer's). Opened only when a query searches; a reader that cannot be reached is
        left alone for READER_RETRY_AFTER_S, the writer answering meanwhile."""
        slot: _Slot = self._slot()
        if not self.reads_scale_out:
            slot.read_from = "writer"
            return self.connection()
        if time.monotonic() < self._reader_down_until:
            return self._reads_on_the_writer(slot)
        conn = self._live(slot.read_conn, slot.read_used_at)
        if conn is None:
            try:
                conn = self._connect(self._database_url(reader=True))
                try:
                    slot.read_on_replica = in_recovery(conn)
                except StoreUnavailableError:
                    conn.close()  # dropped as soon as it answered: never kept, never leaked
                    raise
            except StoreUnavailableError:
                # no reader to be had (one restarting, a failover): the writer answers
                self._reader_down_until = time.monotonic() + READER_RETRY_AFTER_S
                _log.warning(
                    "no reader reachable; reads go to the writer for %s s", READER_RETRY_AFTER_S
                )
                return self._reads_on_the_writer(slot)
            slot.read_conn = conn
        slot.read_used_at = time.monotonic()
        slot.read_from = "reader" if slot.read_on_replica else "writer"
        return conn

    def _reads_on_the_writer(self, slot: _Slot) -> psycopg.Connection[Any]:
        """The writer, for a search that should have run on a reader: counted once per
        request (`ReaderFallbacks`, which the stage's alarm watches), not only logged."""
        if slot.read_from != "writer":
            from aws_lambda_powertools.metrics import MetricUnit

            from grandbo.observability import metrics

            metrics.add_metric("ReaderFallbacks", MetricUnit.Count, 1)
        slot.read_from = "writer"
        return self.connection()

    def read_from(self) -> str | None:
        """Where this request's searches ran ("reader" only if on a replica), or None."""
        return self._slot().read_from

    def forget_read_from(self) -> None:
        """A new request: none of its searches has run yet."""
        self._slot().read_from = None

    def query_org_memory(
        self,
        tenant_id: str,
        topic: str,
        *,
        caller: str,
        incident_id: str | None = None,
        **arguments: Any,
    ) -> MemoryQueryResult:
        """`query_org_memory` as the APIs answer it: admitted within the caller's query rate
        (RateLimitedError past it), the service's result, saying where its searches ran
        (`metadata.read_from`; no reader connection opened: the writer), and recorded in
        the retrieval log (written off the answer's path)."""
        started, asked_at = time.perf_counter(), datetime.now(UTC)
        # the MCP tool's path too: the log stores it
        incident_id = _check_incident_id(incident_id)
        self.admit(tenant_id, caller)  # a 429 past the caller's rate
        self.forget_read_from()
        result = self.service().query_org_memory(tenant_id, topic, **arguments)
        where = self.read_from() or "writer"
        result = result.model_copy(
            update={"metadata": result.metadata.model_copy(update={"read_from": where})}
        )
        latency_ms = (time.perf_counter() - started) * 1000
        writer = self.retrieval_writer
        writer.submit(
            RetrievalRecord.of(tenant_id, caller, incident_id, topic, result, latency_ms, asked_at)
        )
        if _in_lambda() and after_answer.active() is None:
            # a frozen container may never write it: without the extension that ends the
            # invocation after its write (grandbo.runtime.after_answer), written first
            writer.flush(DURABLE_WAIT_S)
        return result

    def admit(self, tenant_id: str, caller: str) -> None:
        """RateLimitedError (a 429 with Retry-After) once `caller` has asked its
        organization's query rate in the sliding minute (`SlidingMinute`): counted in this
        process, against the rate read with the query's settings (cached), never on the
        writer. Every search a person or agent starts is admitted here: Beacon's question,
        the console's search and its "why not this one?"."""
        rate = self.service().query_rate(tenant_id)
        wait = self.admission.admit(tenant_id, caller, rate, time.time())
        if wait:
            raise RateLimitedError(
                f"{rate} queries a minute is this caller's limit", math.ceil(wait)
            )

    def drain_retrievals(self, timeout_s: float) -> bool:
        """Wait until the retrievals handed over are written (the extension's drain)."""
        return self.retrieval_writer.flush(timeout_s)

    @property
    def retrieval_writer(self) -> RetrievalWriter:
        """This container's retrieval log writer (its own thread and writer connection)."""
        with self._lock:
            if self._retrievals is None:
                self._retrievals = RetrievalWriter(
                    lambda: self._connect(self._database_url()),
                    gather_s=0.0 if _in_lambda() else GATHER_S,
                )
            return self._retrievals

    def read_repository(self) -> MemoryRepository:
        """The repository a query searches (`read_connection`), resolved when it searches."""
        return MemoryRepository(self.read_connection())

    def _connect(self, url: str) -> psycopg.Connection[Any]:
        conn = connect(url)
        with self._lock:
            self._connections.append(conn)
        return conn

    @staticmethod
    def _live(
        conn: psycopg.Connection[Any] | None, used_at: float
    ) -> psycopg.Connection[Any] | None:
        """`conn` if it can serve the next request, else None (closed where it must be)."""
        if conn is not None and not conn.closed and not is_idle(conn):
            # a failed request left it inside a transaction (or a pipeline): whatever it
            # holds is released by closing it, never inherited by the next request
            conn.close()
        idle = time.monotonic() - used_at > IDLE_PING_AFTER_S
        if conn is not None and not conn.closed and not conn.broken and idle:
            try:
                conn.execute("SELECT 1")
            except psycopg.Error:
                conn.close()
        if conn is None or conn.closed or conn.broken:
            return None
        return conn

    def close(self) -> None:
        """Close every connection this runtime opened, in any thread (its retrieval
        writer's once what it holds is written)."""
        if self._retrievals is not None:
            self._retrievals.close()
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    @contextmanager
    def container(self, wait_s: float = 10.0) -> Iterator[None]:
        """Serve one request in one of the pool's containers (its own connection and
        services), bound to this thread until the request ends.

        Without a pool (in Lambda: one request at a time) each thread keeps its own.
        ContainersBusyError when none frees up within `wait_s`.
        """
        if self._idle is None:
            yield
            return
        try:
            slot = self._idle.get(timeout=wait_s)
        except queue.Empty:
            raise ContainersBusyError(f"all containers busy for {wait_s:.0f} s") from None
        self._local.slot = slot
        # a pooled container may have sat out a database restart: its first use in this
        # request pings (~0.1 ms on the local socket) and saves the request a 503
        slot.used_at = slot.read_used_at = 0.0
        slot.read_from = None
        try:
            yield
        finally:
            self._local.slot = None
            for conn in (slot.conn, slot.read_conn):
                if conn is not None and not conn.closed and not is_idle(conn):
                    # the request left its connection inside a transaction: close it now,
                    # so the locks it holds are freed before anyone queues behind them
                    conn.close()
            self._idle.put(slot)

    def _slot(self) -> _Slot:
        slot = getattr(self._local, "slot", None)
        if slot is None:  # a thread of its own (Lambda, the embed pump, the CLI)
            slot = self._local.slot = _Slot()
        return slot

    def service(self) -> MemoryService:
        """This container's service. Its writer connection is opened (or checked) at its
        first statement of the request (`writer`), never before: a question, which reads
        only, is answered while the writer cannot be reached (issue 51)."""
        slot = self._slot()
        slot.writer_checked = False
        if slot.service is None:
            slot.service = MemoryService(
                MemoryRepository(self.writer),
                self.provider,
                # resolved at each search: routes that never search never open a reader
                reader=self.read_repository if self.reads_scale_out else None,
                reranker=self.reranker,
                rerank_timeout_s=self.environment.rerank_timeout_s,
                topic_embed_timeout_s=self.environment.topic_embed_timeout_s,
                embed_queue=self.embed_queue,
                topology=self.topology(),
                previous_provider=self.previous_provider,
            )
        return slot.service

    def writer(self) -> psycopg.Connection[Any]:
        """The writer's connection for the statement about to run: checked (and opened or
        replaced) once per request, at its first use (`connection`); as it is after that,
        so a unit of work's statements are never interrupted by the check."""
        slot = self._slot()
        conn = slot.conn
        if slot.writer_checked and conn is not None and not conn.closed and not conn.broken:
            return conn
        conn = self.connection()
        slot.writer_checked = True
        return conn

    def topology(self) -> TopologyService:
        """This container's topology service: its writer connection checked at its first
        statement of the request, as the service's (a request may reach the writer through
        the topology alone: the blast radius, a topology load)."""
        slot = self._slot()
        slot.writer_checked = False
        if slot.topology is None:
            slot.topology = TopologyService(TopologyRepository(self.writer))
        return slot.topology

    def nonces(self) -> NonceStore:
        """The store of signed admin requests' nonces, on this container's connection."""
        conn = self.connection()
        slot = self._slot()
        if slot.nonces is None:
            slot.nonces = NonceStore(conn)
        return slot.nonces

    def iam_people(self) -> IamPeople:
        """The stack's mapping of permission sets to organizations and roles (read once:
        it changes with a deployment, which starts new containers)."""
        if self._iam_people is None:
            from grandbo.api.iam_people import IamPeople  # the admin function's alone

            self._iam_people = IamPeople.from_json(self.environment.iam_people)
        return self._iam_people

    def keyring(self) -> Keyring:
        """The signing keys: from Secrets Manager (cached 5 minutes, as the authorizer's
        answers are), or from a local file, read again as soon as it changes (a key
        removed from it stops authenticating at the next request)."""
        if self._keyring is not None and self._keyring_loaded_at == 0.0:
            return self._keyring  # given by the caller (the tests): used as it is
        env = self.environment
        if env.keyring_file and not env.keyring_secret_arn:
            return self._file_keyring(env.keyring_file)
        if (
            self._keyring is not None
            and time.monotonic() - self._keyring_loaded_at < KEYRING_CACHE_S
        ):
            return self._keyring
        if not env.keyring_secret_arn:
            raise GrandboError("no keyring: set GRANDBO_KEYRING_SECRET_ARN or GRANDBO_KEYRING_FILE")
        from grandbo.runtime.secrets import secret_value

        document = secret_value(env.keyring_secret_arn, max_age_s=KEYRING_CACHE_S)
        self._keyring = Keyring.from_json(document)
        self._keyring_loaded_at = time.monotonic()
        return self._keyring

    def people_file(self) -> Path | None:
        """The keyring file this server reads its keys from and may change (the local
        gateway's: `grandbo.api.people_keyring`), or None when the keys are a deployed
        stack's secret, which the functions only read (its people are managed in IAM
        Identity Center and by a deployment)."""
        env = self.environment
        if env.keyring_file and not env.keyring_secret_arn:
            return Path(env.keyring_file)
        return None

    def _file_keyring(self, path: str) -> Keyring:
        with self._lock:
            if self._keyring_file is None or self._keyring_file.path != path:
                self._keyring_file = KeyringFile(path)
        self._keyring_loaded_at = time.monotonic()
        return self._keyring_file.current()


_runtime: LambdaRuntime | None = None


def runtime() -> LambdaRuntime:
    """The container's runtime (created from the environment on first use)."""
    global _runtime
    if _runtime is None:
        _runtime = LambdaRuntime()
    return _runtime


def warm_at_init() -> None:
    """In Lambda (its init phase: a handler module's import), the embedding provider
    loaded before the first invocation, so the first query meets the topic's deadline
    (`EmbeddingProvider.warm`). Outside Lambda nothing: the local doors warm their own
    runtime. A failure never fails the init: the first query then loads it, as before."""
    if not _in_lambda():
        return
    try:
        runtime().provider.warm_or_say()
    except Exception:  # the runtime itself (its environment) fails later, saying so
        _log.warning("the embedding provider did not warm at init", exc_info=True)


def drain_retrievals(timeout_s: float) -> bool:
    """The container's retrieval writer drained (after an invocation answered)."""
    return runtime().drain_retrievals(timeout_s)


def install_runtime(value: LambdaRuntime | None) -> None:
    """Replace the container's runtime (the local runner and the tests do this)."""
    global _runtime
    _runtime = value
