"""The admin API's topology routes: a namespace's nodes and edges recorded, and the
reads the console draws (blast radius, criticality, dependencies, the node list).
"""

from typing import Any

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from grandbo.api.admin_models import (
    TopologyNodesRequest,
    TopologyReadRequest,
    TopologyRequest,
)
from grandbo.api.auth import Caller
from grandbo.observability import tracer
from grandbo.runtime.lambda_container import runtime
from grandbo.topology.model import TopologyBatch

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.post("/v1/admin/topology")
@tracer.capture_method
def record_topology(request: TopologyRequest) -> dict[str, Any]:
    """Upsert nodes and edges of one namespace; `"sync": true` closes what the batch lacks."""
    caller: Caller = router.context["caller"]
    batch = TopologyBatch.model_validate(request.model_dump(exclude={"sync"}))
    return runtime().topology().record(caller.tenant_id, batch, sync=request.sync)


def _reach(request: TopologyReadRequest, *, dependencies: bool) -> dict[str, Any]:
    caller: Caller = router.context["caller"]
    topology = runtime().topology()
    walk = topology.dependencies if dependencies else topology.blast_radius
    reached = walk(
        caller.tenant_id,
        request.type,
        request.id,
        hops=request.hops,
        as_of=request.as_of,
        namespaces=request.namespaces,
    )
    return reached.model_dump(mode="json")


@router.post("/v1/admin/topology/blast-radius")
def admin_blast_radius(request: TopologyReadRequest) -> dict[str, Any]:
    """What the query route's blast radius answers, for the key's organization."""
    return _reach(request, dependencies=False)


@router.post("/v1/admin/topology/criticality")
def admin_criticality(request: TopologyReadRequest) -> dict[str, Any]:
    """What the query route's criticality answers, for the key's organization."""
    caller: Caller = router.context["caller"]
    result = (
        runtime()
        .topology()
        .criticality(
            caller.tenant_id,
            request.type,
            request.id,
            as_of=request.as_of,
            namespaces=request.namespaces,
        )
    )
    return result.model_dump(mode="json")


@router.post("/v1/admin/topology/dependencies")
def admin_dependencies(request: TopologyReadRequest) -> dict[str, Any]:
    """What the node depends on, nearest first (`affected`), for the key's organization."""
    return _reach(request, dependencies=True)


@router.post("/v1/admin/topology/nodes")
def admin_topology_nodes(request: TopologyNodesRequest) -> dict[str, Any]:
    """The organization's topology nodes by type and id (the console's service list)."""
    caller: Caller = router.context["caller"]
    nodes = (
        runtime().topology().node_list(caller.tenant_id, as_of=request.as_of, limit=request.limit)
    )
    return {"nodes": [node.model_dump(mode="json") for node in nodes]}
