"""What the query handler adds beyond the search and the topic's embedding (issue 28): the
query Lambda's handler invoked in-process with API Gateway's REST proxy event (as the
authorizer leaves it), on a 300-entry organization; each call split into the topic's
embedding (the local MiniLM model), the repository's search (one call of grandbo_search)
and the rest (the event, routing, validation, fusion, collapse, the answer's JSON,
metrics), p50 / p95 ms; and each call's CPU time and the process's peak memory, the
figures a Lambda bill is made of.

    .venv/bin/python -m bench.handler_overhead [--runs 300]
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import importlib.util
import itertools
import json
import random
import resource
import time
from typing import Any

from bench import synthetic
from bench.query_scale import Lake, embedded_pool, percentiles, scratch_server
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.local.runner import lambda_context, proxy_event
from grandbo.memory.repository import MemoryRepository
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime
from grandbo.storage.connections import app_url_for

TENANT = "small"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    from functions.query_api.handler import lambda_handler

    provider = LocalMiniLMProvider()
    texts, pool_vectors = embedded_pool(provider)
    rng = random.Random(5)
    topics = [synthetic.topic_text(rng) for _ in range(40)]
    with scratch_server() as admin_url:
        lake = Lake(admin_url, provider.embed_rev)
        lake.load(TENANT, synthetic.organization(300, texts, pool_vectors, 0))
        lake.analyze()
        runtime = LambdaRuntime(
            LambdaEnvironment.model_validate(
                {"DATABASE_URL": app_url_for(admin_url), "GRANDBO_EMBEDDING_PROVIDER": "local"}
            ),
            provider=provider,
            containers=1,
        )
        install_runtime(runtime)
        parts: dict[str, list[float]] = {"embedding": [], "search": []}
        embed_one = provider.embed_one
        search = MemoryRepository.search

        def timed_embed(text: str) -> Any:
            t0 = time.perf_counter()
            try:
                return embed_one(text)
            finally:
                parts["embedding"].append((time.perf_counter() - t0) * 1000)

        def timed_search(self: MemoryRepository, *a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return search(self, *a, **kw)
            finally:
                parts["search"].append((time.perf_counter() - t0) * 1000)

        provider.embed_one = timed_embed  # type: ignore[method-assign]
        MemoryRepository.search = timed_search  # type: ignore[method-assign]
        # the confidence model's share of the rest (issue 33): the signals of every
        # candidate, scored (absent from a checkout before it: then no figure)
        model_module: Any = importlib.util.find_spec("grandbo.memory.read.confidence.model")
        parts["confidence"] = []
        if model_module is not None:
            from grandbo.memory.read.confidence.model import ConfidenceModel

            confidences = ConfidenceModel.confidences

            def timed_confidences(self: ConfidenceModel, *a: Any, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return confidences(self, *a, **kw)
                finally:
                    parts["confidence"].append((time.perf_counter() - t0) * 1000)

            ConfidenceModel.confidences = timed_confidences  # type: ignore[method-assign]
        totals, added, cpu = [], [], []
        it = itertools.cycle(topics)
        context = lambda_context("grandbo-query")
        for n in range(args.runs + 10):
            body = json.dumps({"topic": next(it), "limit": 5}).encode()
            event = proxy_event(
                "POST",
                "/v1/memory/query",
                {"Content-Type": "application/json", "User-Agent": "grandbo/bench (handler)"},
                body,
                authorizer={"tenant_id": TENANT, "key_id": f"{TENANT}-beacon"},
            )
            before = len(parts["embedding"]), len(parts["search"])
            c0 = time.process_time()
            t0 = time.perf_counter()
            answer = lambda_handler(event, context)
            total = (time.perf_counter() - t0) * 1000
            used = (time.process_time() - c0) * 1000
            assert answer["statusCode"] == 200, answer
            if n < 10:  # warm-up: the model, the connection, the plans
                continue
            inner = sum(parts["embedding"][before[0] :]) + sum(parts["search"][before[1] :])
            totals.append(total)
            added.append(total - inner)
            cpu.append(used)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        report = {
            "handler, whole call": percentiles(totals),
            "topic embedding (MiniLM, local)": percentiles(parts["embedding"][10:]),
            "search (grandbo_search)": percentiles(parts["search"][10:]),
            "what the handler adds": percentiles(added),
            "of which the confidence model": percentiles(parts["confidence"][10:])
            if parts["confidence"]
            else "not in this checkout",
            "CPU time per call (this process)": percentiles(cpu),
            "peak RSS of the process, MB (model and benchmark included)": round(peak_mb, 1),
        }
        for name, figures in report.items():
            print(f"{name}: {figures}")
        runtime.close()
        install_runtime(None)


if __name__ == "__main__":
    main()
