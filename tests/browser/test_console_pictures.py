"""The console's pictures in Chromium: a blast radius drawn from the topology, and the
weekly growth of the memory; each checked against the admin API's answer."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

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
    heading = page.locator("#dependents h2").inner_text()
    assert f"({len(radius['affected'])})" in heading
    graph = page.locator("#dependents svg.graph")
    assert graph.locator("circle.node").count() == len(radius["affected"])
    labels = graph.locator("text.label").all_text_contents()
    for node in radius["affected"]:
        assert f"{node['external_id']} ({node['distance']})" in labels
    assert graph.locator("line.edge").count() == len(radius["affected"])
    # postgres depends on nothing: the view says so in words
    assert (
        "postgres depends on nothing within 3 hop(s)" in page.locator("#dependencies").inner_text()
    )
    # the service list names every node, and each leads to its own view
    listed = page.locator("nav.services li a").all_inner_texts()
    assert listed == ["checkout", "ledger", "payments", "postgres", "web"]
    page.locator("nav.services").get_by_role("link", name="checkout").click()
    page.wait_for_url("**id=checkout**")
    dependencies = page.locator("#dependencies table.affected tbody tr td:first-child")
    assert dependencies.all_inner_texts() == ["payments", "postgres"]
    dependents = page.locator("#dependents table.affected tbody tr td:first-child")
    assert dependents.all_inner_texts() == ["web"]
    tab.shot("topology-checkout", tmp_path)
    page = tab.open("/topology?" + urlencode({"id": "postgres", "hops": 3}))
    tab.shot("topology", tmp_path)
    # the learned view of a node no incident has tied to another says so, in words
    page = tab.open("/topology?" + urlencode({"id": "postgres", "namespaces": "learned"}))
    assert (
        "No incident has tied postgres to another service yet"
        in page.locator("#dependents").inner_text()
    )
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


def test_long_node_names_are_drawn_whole(tab: Tab) -> None:
    console = tab.console
    long_name = "payments-settlement-reconciliation-worker-eu-west-1"
    batch = {
        "namespace": "topology",
        "nodes": [_svc("ledger-db"), _svc(long_name)],
        "edges": [_depends(long_name, "ledger-db")],
        "sync": True,
    }
    assert console.api("POST", "/v1/admin/topology", batch).status == 200
    page = tab.open("/topology?" + urlencode({"id": "ledger-db"}))
    graph = page.locator("#dependents svg.graph")
    label = graph.locator("text.label", has_text=long_name)
    assert label.text_content() == f"{long_name} (1)"
    # the whole label lies inside the drawing: nothing of it is cut at the edge
    box, drawing = label.bounding_box(), graph.bounding_box()
    assert box is not None
    assert drawing is not None
    assert box["x"] + box["width"] <= drawing["x"] + drawing["width"]


def test_the_topology_page_lists_services_first_and_draws_one_on_arrival(tab: Tab) -> None:
    """Issue 45: services first, the type picked from a list, and a picture on arrival
    (the first service's), with no empty pane until one is picked."""
    console = tab.console
    assert console.api("POST", "/v1/admin/topology", BATCH).status == 200
    page = tab.open("/topology")
    first = page.locator("nav.services li").first
    assert first.locator(".detail").inner_text() == "Service"
    assert page.locator("svg.graph").count() >= 1  # drawn without asking
    assert page.locator("select[name=type] option").count() >= 1
    assert page.locator("select[name=type]").input_value() == "Service"
    assert page.locator("input[name=type]").count() == 0  # no free text for the type
    # at 400 px the service list starts inside the page (Pico's nav lists sat 4 px left)
    tab.page.set_viewport_size({"width": 400, "height": 900})
    page = tab.open("/topology")
    lefts = page.evaluate(
        "() => [...document.querySelectorAll('nav.services li a')]"
        ".map(a => a.getBoundingClientRect().left)"
    )
    assert lefts
    assert min(lefts) >= 0, lefts


def test_the_topology_page_says_when_it_lists_only_the_first_nodes(
    tab: Tab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45's review: a list cut at its page says so (shown here with a page of 3)."""
    import grandbo.console.app as console_app

    monkeypatch.setattr(console_app, "TOPOLOGY_NODES_SHOWN", 3)
    assert tab.console.api("POST", "/v1/admin/topology", BATCH).status == 200
    page = tab.open("/topology")
    assert "the organization holds more" in page.locator("nav.services").inner_text()
