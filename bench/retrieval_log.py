"""What the retrieval log costs a query (issue 36, point 3: the query's p95 within 5 % of
what it was without it). The whole query path of the query API (`LambdaRuntime.
query_org_memory`: the search, `metadata.read_from`, and the retrieval handed to the
container's writer thread) on a throwaway embedded PostgreSQL, 300 entries (fake model:
the embedding is not what is measured), alternating blocks with the log on and off in
the same process, so both see the same machine:

    .venv/bin/python -m bench.retrieval_log [--entries 300] [--queries 400] [--blocks 6]
    AWS_LAMBDA_FUNCTION_NAME=bench .venv/bin/python -m bench.retrieval_log   # in Lambda
                        # without the extension: each query waits for its retrieval's write
    AWS_LAMBDA_FUNCTION_NAME=bench .venv/bin/python -m bench.retrieval_log --extension
                        # in Lambda with grandbo.runtime.after_answer's internal extension
                        # (Lambda's Extensions API played by grandbo.local.extensions_api):
                        # the answer's latency, and the invocation's until the extension
                        # let it end, each invocation after the previous one ended
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.write_path import _text
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.local.bootstrap import resolve_urls
from grandbo.local.extensions_api import ExtensionsApi
from grandbo.local.runner import lambda_context
from grandbo.local.settings import Settings
from grandbo.memory.domain.models import WriteContext
from grandbo.migrations import migrate
from grandbo.runtime.after_answer import finishes_after_answer, register_after_answer
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime

TENANT = "bench-retrievals"


class _Off:
    """A writer that writes nothing: the query path without the log."""

    def submit(self, record: object) -> None:
        return None

    def flush(self, timeout_s: float = 5.0) -> bool:
        return True


def _extension(runtime: LambdaRuntime) -> ExtensionsApi:
    """The internal extension registered with a loopback Extensions API, draining
    `runtime`'s writer after each answer."""
    lambda_api = ExtensionsApi()
    os.environ["AWS_LAMBDA_RUNTIME_API"] = lambda_api.address
    registered = register_after_answer(runtime.drain_retrievals)
    assert registered is not None, "the extension did not register"
    lambda_api.nexts.get(timeout=5)  # its Init is done
    return lambda_api


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=300)
    parser.add_argument("--queries", type=int, default=400, help="per block")
    parser.add_argument("--blocks", type=int, default=6, help="per mode, alternating")
    parser.add_argument(
        "--extension", action="store_true", help="with the internal extension, as in Lambda"
    )
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="grandbo-bench-retrievals-"))
    settings = Settings.from_env().model_copy(update={"data_dir": data, "provider": "fake"})
    try:
        urls = resolve_urls(settings)
        migrate(urls.admin)
        runtime = LambdaRuntime(
            LambdaEnvironment.model_validate(
                {"DATABASE_URL": urls.app, "GRANDBO_EMBEDDING_PROVIDER": "fake"}
            ),
            provider=FakeEmbeddingProvider(),
        )
        service = runtime.service()
        for n in range(args.entries):
            title, summary = _text(n)
            context = WriteContext(actor="bench", idempotency_key=f"bench:{n}")
            entry = {"title": title, "summary": summary, "service": f"service-{n % 40}"}
            service.record_entry(TENANT, entry, context)
        service.embed_pending(TENANT)
        topics = [
            f"{_text(n)[1]} and the on-call saw it again in service-{n % 40}" for n in range(64)
        ]
        on, off = runtime.retrieval_writer, _Off()
        timings: dict[str, list[float]] = {"log on": [], "log off": []}
        invocations: dict[str, list[float]] = {"log on": [], "log off": []}
        lambda_api = _extension(runtime) if args.extension else None

        @finishes_after_answer
        def ask(topic: str, context: object) -> None:
            runtime.query_org_memory(TENANT, topic, caller="bench", incident_id="INC-B")

        for block in range(2 * args.blocks):
            mode = "log on" if block % 2 == 0 else "log off"
            runtime._retrievals = on if mode == "log on" else off  # type: ignore[assignment]
            for n in range(args.queries):
                context = lambda_context("bench")
                if lambda_api is not None:  # the invocation's id, the handler's context's
                    context.aws_request_id = lambda_api.invoke()
                started = time.perf_counter()
                ask(topics[n % len(topics)], context)
                timings[mode].append((time.perf_counter() - started) * 1000)
                if lambda_api is not None:  # the next invocation starts once this one ended
                    lambda_api.nexts.get(timeout=10)
                    invocations[mode].append((time.perf_counter() - started) * 1000)
            on.flush(30)
        runtime._retrievals = on
        for mode, values in timings.items():
            print(
                f"{mode}: {len(values)} queries into {args.entries} entries: "
                f"p50 {statistics.median(values):.2f} ms, p95 {_p95(values):.2f} ms"
            )
        for mode, values in invocations.items():
            if values:
                print(
                    f"{mode}: invocation until the extension's Next: "
                    f"p50 {statistics.median(values):.2f} ms, p95 {_p95(values):.2f} ms"
                )
        print(f"retrievals written {on.written}, dropped {on.dropped}")
        if lambda_api is not None:
            lambda_api.close()
        base, logged = _p95(timings["log off"]), _p95(timings["log on"])
        print(f"p95 with the log: {100 * (logged - base) / base:+.1f} % of the p95 without")
        runtime.close()
    finally:
        from grandbo.local.postgres import stop_embedded_postgres

        stop_embedded_postgres(data)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
