"""`grandbo audit [--tenant T] [--repair] [--json]`: the memory lake's health; exit 1 when
something is wrong (after `--repair`: when something is still wrong), so a scheduled job
can alarm on it."""

from __future__ import annotations

import argparse
import json
import logging

from grandbo.local.settings import Settings
from grandbo.memory.curation.audit import Finding, TenantHealth, audit, repair
from grandbo.memory.service import MemoryService

_log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "audit",
        help="check the memory lake's health (exit 1 when something is wrong)",
        description="Vectors missing or stale, projection or index drift, expired "
        "episodic entries still active, missing HNSW indexes, entries called misleading.",
    )
    parser.add_argument("--tenant", help="one organization (default: every one)")
    parser.add_argument(
        "--repair", action="store_true", help="fix what is safe to fix, and say what was done"
    )
    parser.add_argument("--json", action="store_true", help="print the health as JSON")


def cmd_audit(args: argparse.Namespace, service: MemoryService, settings: Settings) -> int:
    # one organization named is one that exists (the command line checked it)
    tenants = [args.tenant] if args.tenant else service.repository.tenant_ids()
    results: list[TenantHealth] = []
    for tenant in tenants:
        try:
            health = audit(service, tenant, verify_most=None)
            if args.repair and health.findings:
                health = repair(service, health, build_index=lambda: _build_indexes(settings))
        except Exception as exc:  # one organization's failure never stops the others' audit
            _log.exception("the audit of %s failed", tenant)
            health = TenantHealth(tenant)
            health.findings.append(
                Finding("audit_failed", 1, f"{type(exc).__name__}: {exc}", repairable=False)
            )
        results.append(health)
    if args.json:
        print(json.dumps([health.as_dict() for health in results], indent=2))
    else:
        for health in results:
            state = "healthy" if health.healthy else "NEEDS ATTENTION"
            print(f"{health.tenant_id}: {state}")
            for finding in health.findings:
                done = f" -> repaired: {finding.repaired}" if finding.repaired else ""
                print(f"  {finding.check} ({finding.count}): {finding.detail}{done}")
    return 0 if all(health.healthy for health in results) else 1


def _build_indexes(settings: Settings) -> list[str]:
    from grandbo.local.bootstrap import resolve_urls
    from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes

    return ensure_hnsw_indexes(resolve_urls(settings).admin)
