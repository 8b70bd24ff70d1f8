"""The console's pictures in Chromium: a blast radius drawn from the topology, and the
weekly growth of the memory; each checked against the admin API's answer."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from .conftest import Tab


def _svc(name: str) -> dict[str, str]:
    return {"node_type": "Service", "external_id": name}


def _depends(source: str, target: str) -> dict[str, object]:
    return {"source": _svc(source), "edge_type": "DEPENDS_ON", "target": _svc(target)}


BATCH = {
    "namespace": "topology",
    "nodes": [_svc(n) for n in ("web", "checkout", "payments", "ledger", "postgres")],
    "edges": [
        _depends("web", "checkout"),
        _depends("checkout", "payments"),
        _depends("payments", "postgres"),
        _depends("ledger", "postgres"),
    ],
    "sync": True,
}


def test_a_blast_radius_as_a_graph(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    assert console.api("POST", "/v1/admin/topology", BATCH).status == 200
    page = tab.open("/topology?" + urlencode({"id": "postgres", "hops": 3}))
    radius = console.api(
        "POST", "/v1/admin/topology/blast-radius", {"id": "postgres", "hops": 3}
    ).body
    assert page.locator("strong.affected").inner_text() == str(len(radius["affected"]))
    graph = page.locator("svg.graph")
    assert graph.locator("circle.node").count() == len(radius["affected"])
    labels = graph.locator("text.label").all_text_contents()
    for node in radius["affected"]:
        assert f"{node['external_id']} ({node['distance']})" in labels
    assert graph.locator("line.edge").count() == len(radius["affected"])
    tab.shot("topology", tmp_path)
    page = tab.open("/topology?" + urlencode({"id": "postgres", "namespaces": "both"}))
    both = console.api(
        "POST", "/v1/admin/topology/blast-radius", {"id": "postgres", "namespaces": "both"}
    ).body
    assert both["namespaces"] == "both"
    assert "namespaces both" in page.locator("main").inner_text()
    assert page.locator("select[name=namespaces]").input_value() == "both"

    # another organization's topology is not this one's
    other = console.api(
        "POST", "/v1/admin/topology/blast-radius", {"id": "postgres"}, tenant=console.other_tenant
    )
    assert (other.status, other.body["field"]) == (400, "external_id")  # no such node there


def test_growth_per_week(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    for n in range(3):
        console.create(
            {
                "title": f"Batch job {n} ran out of scratch disk",
                "summary": f"Batch job {n} filled its scratch volume and every run failed.",
            }
        )
    page = tab.open("/growth")
    weeks = console.api("GET", "/v1/admin/growth").body["weeks"]
    assert weeks[-1]["created"] == {"admin": 3}
    last = page.locator("svg.chart g.week").last
    assert last.get_attribute("data-total") == "3"
    assert last.locator("rect.s-admin").count() == 1
    tab.shot("growth", tmp_path)
