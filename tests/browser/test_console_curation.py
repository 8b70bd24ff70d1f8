"""Curation in Chromium: each action is taken on the page, then the admin API's own state
is read back (the console's answer alone proves nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grandbo.storage.connections import DatabaseUrls, connect

from .conftest import ConsoleServer, Tab

POOL = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
    "service": "checkout-api",
}
LOOK_ALIKE = {
    "title": "Checkout pool exhausted by a connection leak on retries",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a free connection.",
    "service": "checkout-api",
}


def _entry(console: ConsoleServer, entry_id: str) -> dict[str, Any]:
    reply = console.api("GET", f"/v1/admin/entries/{entry_id}")
    assert reply.status == 200
    return dict(reply.body)


def test_a_correction_is_a_new_revision_in_the_history(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    entry = console.create(POOL)
    page = tab.open(f"/entries/{entry['entry_id']}")
    corrected = "Checkout pool exhausted by a leaked connection on the retry path"
    page.fill("#correct input[name=title]", corrected)
    sent = {
        name: page.locator(f"#correct [name={name}]").input_value()
        for name in ("csrf", "idempotency_key", "expected_revision", "title", "summary", "service")
    }
    page.click("#correct button[type=submit]")
    assert "new revision was recorded" in page.locator("p.done").inner_text()
    assert page.locator("h1").inner_text() == corrected
    events = page.locator("ol.history li.event")
    assert events.nth(0).get_attribute("data-type") == "entry_corrected"
    assert events.nth(0).locator("p.title").inner_text() == corrected
    assert events.nth(1).locator("p.title").inner_text() == POOL["title"]
    assert "through admin" in events.nth(0).inner_text()

    stored = _entry(console, entry["entry_id"])
    assert (stored["revision"], stored["title"]) == (2, corrected)
    history = console.api("GET", f"/v1/admin/entries/{entry['entry_id']}/history").body
    assert [e["event_type"] for e in history["events"]] == ["entry_created", "entry_corrected"]
    tab.shot("entry", tmp_path)

    # the same form sent again (a double click, a resubmission) is not a third revision
    again = page.request.post(
        f"{console.url}/entries/{entry['entry_id']}/correct",
        form=sent,
        headers={"Origin": console.url},
        max_redirects=0,
    )
    assert again.status == 303
    assert _entry(console, entry["entry_id"])["revision"] == 2


def test_retire_with_a_successor(tab: Tab) -> None:
    console = tab.console
    old = console.create(POOL)
    new = console.create({**POOL, "title": "Checkout pool sized below the retry fan-out"})
    page = tab.open(f"/entries/{old['entry_id']}")
    page.fill("#retire input[name=reason]", "a better diagnosis replaced it")
    page.fill("#retire input[name=superseded_by]", new["entry_id"])
    page.click("#retire button[type=submit]")
    assert page.locator("strong.status").inner_text() == "superseded"
    stored = _entry(console, old["entry_id"])
    assert (stored["status"], stored["superseded_by"]) == ("superseded", new["entry_id"])


def test_a_suggested_pair_merged_then_split(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    older = console.create(POOL)
    newer = console.create(LOOK_ALIKE)
    console.gateway.drain()
    page = tab.open("/review")
    pair = page.locator(f"div.pair[data-recurrence='{newer['entry_id']}']")
    assert pair.get_attribute("data-canonical") == older["entry_id"]
    tab.shot("review", tmp_path)
    pair.locator("button.merge").click()
    # the merge is previewed first, then confirmed
    assert page.locator("section.merged p.title").inner_text() == LOOK_ALIKE["title"]
    assert _entry(console, newer["entry_id"])["status"] == "active"
    page.click("#confirm-merge button[type=submit]")
    assert "Merged" in page.locator("p.done").inner_text()
    assert page.locator("div.pair").count() == 0
    assert _entry(console, newer["entry_id"])["merged_into"] == older["entry_id"]
    assert _entry(console, older["entry_id"])["seen_count"] == 2

    page = tab.open(f"/entries/{older['entry_id']}")
    page.locator("ul.recurrences button[name=split]").click()
    assert "split back out" in page.locator("p.done").inner_text()
    restored = _entry(console, newer["entry_id"])
    assert (restored["status"], restored["never_merge"]) == ("active", True)
    assert _entry(console, older["entry_id"])["seen_count"] == 1


def test_a_pair_marked_distinct_is_not_suggested_again(tab: Tab) -> None:
    console = tab.console
    older = console.create(POOL)
    newer = console.create(LOOK_ALIKE)
    console.gateway.drain()
    page = tab.open("/review")
    page.locator(f"div.pair[data-recurrence='{newer['entry_id']}'] button.distinct").click()
    assert "two lessons" in page.locator("p.done").inner_text()
    pairs = console.api("GET", "/v1/admin/duplicates").body["pairs"]
    assert all(p["recurrence"]["entry_id"] != newer["entry_id"] for p in pairs)
    assert _entry(console, newer["entry_id"])["status"] == "active"
    assert _entry(console, older["entry_id"])["status"] == "active"


def test_an_episodic_entry_created_then_promoted(tab: Tab) -> None:
    console = tab.console
    page = tab.open("/entries/new")
    page.fill("input[name=title]", "Deploy 4812 rolled back after a canary alarm")
    page.fill(
        "textarea[name=summary]",
        "The canary for deploy 4812 raised the 5xx alarm within two minutes and was rolled back.",
    )
    page.select_option("select[name=kind]", "episodic")
    page.click("form.entry-form button[type=submit]")
    assert page.locator("p.done").inner_text().startswith("Entry created: found by its words")
    entry_id = page.url.split("/entries/")[1].split("?")[0]
    assert _entry(console, entry_id)["kind"] == "episodic"
    page.click("#promote button")
    assert "durable" in page.locator("p.done").inner_text()
    stored = _entry(console, entry_id)
    assert (stored["kind"], stored["expires_at"]) == ("durable", None)


def test_the_catalog_filters_and_pages(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    made = [
        console.create(
            {
                "title": f"Batch job {n} ran out of scratch disk",
                "summary": f"Batch job {n} filled its scratch volume and every run failed.",
                "service": "batch" if n % 2 else "reports",
            }
        )
        for n in range(3)
    ]
    page = tab.open("/entries")
    assert page.locator("table.entries tbody tr").count() == 3
    page.fill("input[name=service]", "batch")
    page.click("form.filters button")
    page.wait_for_url("**service=batch**")
    rows = page.locator("table.entries tbody tr")
    assert [rows.nth(i).get_attribute("data-entry") for i in range(rows.count())] == [
        e["entry_id"] for e in made if e["service"] == "batch"
    ]
    tab.shot("entries", tmp_path)


def test_a_repair_from_the_health_page(tab: Tab, database: DatabaseUrls, tmp_path: Path) -> None:
    console = tab.console
    entry = console.create(POOL)
    # the projection drifts from the event log (a row edited behind the log's back)
    with connect(database.admin) as conn:
        conn.execute(
            "UPDATE org_memory_entries SET title = 'tampered'"
            " WHERE tenant_id = %s AND entry_id = %s",
            (console.tenant, entry["entry_id"]),
        )
    page = tab.open("/health")
    row = page.locator("tr[data-check=projection_drift]")
    assert row.count() == 1
    tab.shot("health", tmp_path)
    row.locator("input[type=checkbox]").check()
    page.click("form button[type=submit]:has-text('Repair')")
    assert "projection rebuilt" in page.locator("section.repaired").inner_text()
    assert _entry(console, entry["entry_id"])["title"] == POOL["title"]
    checks = [f["check"] for f in console.api("GET", "/v1/admin/health").body["findings"]]
    assert "projection_drift" not in checks


def test_settings_and_calibration(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    page = tab.open("/settings")
    page.fill("input[name=episodic_ttl_days]", "14")
    page.click("form.entry-form button")
    assert page.locator("p.done").inner_text() == "Settings saved."
    assert console.api("GET", "/v1/admin/settings").body["episodic_ttl_days"] == 14
    assert page.locator("input[name=episodic_ttl_days]").input_value() == "14"
    # the confidence floor: set, shown, refused out of range, reset to the model's
    page.fill("input[name=min_confidence]", "0.25")
    page.click("form:has(input[value=floor]) button")
    assert page.locator("p.done").inner_text() == "Settings saved."
    settings = console.api("GET", "/v1/admin/settings").body
    assert settings["min_confidence"] == 0.25
    assert settings["min_confidence_set"] is True
    assert page.locator("strong.floor").inner_text() == "0.25"
    page.click("form:has(input[value=floor-reset]) button")
    settings = console.api("GET", "/v1/admin/settings").body
    assert settings["min_confidence_set"] is False
    assert settings["min_confidence"] == settings["model_min_confidence"]
    tab.shot("settings", tmp_path)
