"""The curation console: server-rendered pages over the signed admin API.

Search as Beacon sees it, explained; "why not this one?"; the entries and each one's
history with every action the API has; the review lists (misleading, expired, unembedded,
possible duplicates); health and its repairs; settings and calibration; a service's
blast radius; growth per week. Plain forms, no script: every page works without
JavaScript, and the Content-Security-Policy allows none (`grandbo.console.security`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from grandbo.api.client import GrandboHTTPError
from grandbo.api.people import is_sign_in_token
from grandbo.console.backend import ConsoleBackend
from grandbo.console.base import CONSOLE_DIR, SCOPES, ConsoleBase
from grandbo.console.charts import ScoreBar, blast_radius_picture, weekly_chart
from grandbo.console.entry_pages import EntryPages
from grandbo.console.forms import (
    ConsoleError,
    entry_id_of,
    entry_pair_of,
    probability,
    redirect_done,
    text_of,
    whole_number,
)
from grandbo.console.people_pages import PeoplePages
from grandbo.console.review import MAX_BULK, review_list
from grandbo.console.security import SESSION_TTL_S, ConsoleDoors, DoorsMiddleware, Session

# the nodes the topology page lists (the API's page of them): past it the page says so
TOPOLOGY_NODES_SHOWN = 1000


class Console(ConsoleBase):
    """The pages, over one organization's admin key (`ConsoleBackend`)."""

    # -- login ---------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        token = request.query_params.get("token")
        if request.method == "POST":
            token = str((await request.form()).get("token", ""))
        elif token and is_sign_in_token(token):
            # a person's link asks first: the session opens on this page's own POST
            person = self.doors.person_of(token)
            if person is None:
                return self.render(request, None, "login.html", 403, refused=True, confirm=None)
            held = self.doors.session(request)
            return self.render(
                request,
                None,
                "login.html",
                refused=False,
                confirm=person,
                token=token,
                signed_in=None if held is None else (held.key and held.key.person) or "operator",
            )
        if token:
            session = self.doors.log_in(token)
            if session is not None:
                held = self.doors.session(request)
                if held is not None:  # the browser's cookie is replaced: that session ends
                    self.doors.log_out(held)
                response = RedirectResponse("/", status_code=303)
                response.set_cookie(
                    self.doors.cookie_name,
                    session.session_id,
                    max_age=SESSION_TTL_S,
                    httponly=True,
                    samesite="strict",
                    path="/",
                )
                return response
            return self.render(request, None, "login.html", 403, refused=True, confirm=None)
        return self.render(request, None, "login.html", refused=False, confirm=None)

    async def logout(self, request: Request, session: Session) -> Response:
        self.doors.log_out(session)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(self.doors.cookie_name, path="/")
        return response

    # -- search and "why not this one?" ----------------------------------------------

    def _query(self, request: Request) -> dict[str, Any] | None:
        params = request.query_params
        topic = params.get("topic", "").strip()
        if not topic:
            return None
        query: dict[str, Any] = {
            "topic": topic,
            "limit": whole_number(params.get("limit"), "limit", 5),
        }
        if params.get("service"):
            query["service"] = params["service"]
        if params.get("scope"):
            if params["scope"] not in SCOPES:
                raise ConsoleError(400, f"scope must be one of {', '.join(SCOPES)}", "scope")
            query["scope"] = params["scope"]
        return query

    async def search(self, request: Request, session: Session) -> Response:
        """The agent's search (a sentence, answered as Beacon is answered), or a person's
        keyword search over titles, summaries and services (`mode=keywords`)."""

        def shown(status: int = 200, **values: Any) -> HTMLResponse:
            page: dict[str, Any] = {
                "mode": "sentence",
                "query": {},
                "keyword_results": None,
                "answer": None,
                "bars": [],
                "query_string": "",
                "refused_topic": "",
            }
            return self.render(request, session, "search.html", status, **(page | values))

        if request.query_params.get("mode") == "keywords":
            words = request.query_params.get("topic", "").strip()[:200]
            found = None
            if words:
                found = await self.api(session).catalog({"words": words, "limit": 50})
            return shown(mode="keywords", query={"topic": words}, keyword_results=found)
        query = self._query(request)
        if query is None:
            return shown()
        try:
            answer = await self.api(session).search(query)
        except GrandboHTTPError as exc:
            if exc.body.get("error") != "invalid_topic":
                raise
            # a person's words, not the agent's sentence: offered as a keyword search
            return shown(422, query=query, refused_topic=str(exc.body.get("message", "")))
        return shown(
            query=query,
            answer=answer,
            bars=[ScoreBar.of(hit["why"]) for hit in answer["hits"]],
            query_string=urlencode(query),
        )

    async def why(self, request: Request, session: Session) -> Response:
        query = self._query(request)
        raw_entry = request.query_params.get("entry_id", "").strip()
        explanation = None
        if query is not None and raw_entry:
            explanation = await self.api(session).explain(query, entry_id_of(raw_entry, "entry_id"))
        return self.render(
            request,
            session,
            "why.html",
            query=query or {},
            entry_id=raw_entry,
            explanation=explanation,
            bar=None if explanation is None else ScoreBar.of(explanation),
        )

    # -- the retrieval log: what the agent asked, and what memory could not answer -----

    async def incidents(self, request: Request, session: Session) -> Response:
        """The incidents whose agent asked memory; with `id`, one incident's questions and
        answers, with the verdicts given on them and their notes."""
        incident_id = request.query_params.get("id", "").strip()
        if not incident_id:
            listed = await self.api(session).retrieval_incidents(100)
            return self.render(request, session, "incidents.html", incidents=listed["incidents"])
        if len(incident_id) > 200:
            raise ConsoleError(400, "an incident id is at most 200 characters", "id")
        page = await self.api(session).retrievals({"incident_id": incident_id, "limit": 200})
        verdicts: dict[str, list[dict[str, Any]]] = {}
        for verdict in page["verdicts"]:
            verdicts.setdefault(verdict["entry_id"], []).append(verdict)
        served = {hit["entry_id"] for r in page["retrievals"] for hit in r["hits"]}
        return self.render(
            request,
            session,
            "incident.html",
            incident_id=incident_id,
            page=page,
            verdicts=verdicts,
            unserved=[v for v in page["verdicts"] if v["entry_id"] not in served],
        )

    async def remove_question(self, request: Request, session: Session) -> Response:
        """An admin removes one logged question (a secret typed into a topic), with its
        reason; back to its incident's page (or the unanswered page it was on), which no
        longer shows it."""
        form = await request.form()
        retrieval_id = entry_id_of(text_of(form, "retrieval_id"), "retrieval_id")
        reason = _removal_reason(form)
        await self.api(session).remove_question(retrieval_id, reason)
        if text_of(form, "back") == "unanswered":  # a question asked under no incident
            return redirect_done("/unanswered", "question_removed")
        return redirect_done(_incident_page(form), "question_removed")

    async def remove_note(self, request: Request, session: Session) -> Response:
        """An admin removes one verdict's note (a secret quoted in it), with its reason;
        back to its incident's page, where the verdict stands and its note reads
        removed."""
        form = await request.form()
        verdict_id = whole_number(form.get("verdict_id"), "verdict_id")
        await self.api(session).remove_note(verdict_id, _removal_reason(form))
        return redirect_done(_incident_page(form), "note_removed")

    async def remove_verdict(self, request: Request, session: Session) -> Response:
        """An admin removes one verdict (a flood's, a sender's not to be trusted), with its
        reason; back to its incident's page, which shows it removed (who, when, why)."""
        form = await request.form()
        verdict_id = whole_number(form.get("verdict_id"), "verdict_id")
        await self.api(session).remove_verdict(verdict_id, _removal_reason(form))
        return redirect_done(_incident_page(form), "verdict_removed")

    async def unanswered(self, request: Request, session: Session) -> Response:
        """The questions memory served no hit for (the answer's own rule: the floor and
        the regime), grouped by similar topics: each group a lesson a curator may write."""
        filters: dict[str, Any] = {"unanswered": True, "limit": 100}
        before = request.query_params.get("before", "").strip()
        if before:
            filters["before"] = before
        page = await self.api(session).retrievals(filters)
        by_id = {r["retrieval_id"]: r for r in page["retrievals"]}
        groups = [
            {**group, "questions": [by_id[i] for i in group["retrieval_ids"]]}
            for group in page["groups"]
        ]
        return self.render(
            request,
            session,
            "unanswered.html",
            groups=groups,
            total=len(page["retrievals"]),
            next_query=None if not page["next"] else urlencode({"before": page["next"]}),
        )

    # -- review, health, settings ----------------------------------------------------

    async def review(
        self,
        request: Request,
        session: Session,
        *,
        outcome: list[dict[str, Any]] | None = None,
    ) -> Response:
        """What asks a person's judgement: entries called misleading, lessons the topology
        changed under, possible duplicates (each with its total, a page of 25, grouped by
        service, and a bulk action), expired and unembedded entries."""
        api = self.api(session)
        health = await api.health()
        findings = {f["check"]: f for f in health.get("findings", [])}
        review = await api.review()
        duplicates = await api.duplicates()
        params = request.query_params

        def page_of(name: str) -> int:
            return whole_number(params.get(f"{name}_page"), f"{name}_page", 1)

        return self.render(
            request,
            session,
            "review.html",
            misleading=review,
            misleading_list=review_list(
                review["entries"], page_of("misleading"), lambda e: e.get("service")
            ),
            stale_list=review_list(
                review.get("stale", []), page_of("stale"), lambda s: s["entry"].get("service")
            ),
            duplicates=duplicates,
            duplicate_list=review_list(
                duplicates["pairs"], page_of("duplicates"), lambda p: p["canonical"].get("service")
            ),
            expired=findings.get("expired_active"),
            unembedded=findings.get("unembedded"),
            outcome=outcome,
            max_bulk=MAX_BULK,
        )

    async def review_bulk(self, request: Request, session: Session) -> Response:
        """One action on several entries or pairs chosen on the review page: each is its own
        signed request, and the page says how each went."""
        form = await request.form()
        action = text_of(form, "action")
        chosen = [str(value) for value in form.getlist("chosen")][: MAX_BULK + 1]
        if not chosen:
            raise ConsoleError(400, "choose at least one", "chosen")
        if len(chosen) > MAX_BULK:
            raise ConsoleError(400, f"at most {MAX_BULK} at once", "chosen")
        # Every chosen value is read before the first call, so a malformed one refuses the
        # whole action and nothing is half done.
        api = self.api(session)
        outcome: list[dict[str, Any]] = []
        if action == "retire":
            reason = text_of(form, "reason")
            if not reason:
                raise ConsoleError(400, "a retirement needs its reason", "reason")
            entries = [(entry_id_of(value, "chosen"), value) for value in chosen]
            for entry_id, value in entries:
                outcome.append(await _attempt(api.retire(entry_id, {"reason": reason}), value))
        elif action == "distinct":
            pairs = [(*entry_pair_of(value, "chosen"), value) for value in chosen]
            for first, second, value in pairs:
                outcome.append(await _attempt(api.mark_distinct(first, second), value))
        else:
            raise ConsoleError(400, "the bulk action is retire or distinct", "action")
        return await self.review(request, session, outcome=outcome)

    async def health(self, request: Request, session: Session) -> Response:
        repaired = None
        if request.method == "POST":
            form = await request.form()
            checks = [str(value) for value in form.getlist("check")]
            if not checks:
                raise ConsoleError(400, "choose at least one finding to repair", "check")
            repaired = await self.api(session).repair(checks)
        return self.render(
            request,
            session,
            "health.html",
            health=await self.api(session).health(),
            repaired=repaired,
        )

    async def settings(self, request: Request, session: Session) -> Response:
        calibration = None
        if request.method == "POST":
            form = await request.form()
            what = text_of(form, "what")
            if what == "calibrate":
                calibration = await self.api(session).calibrate(
                    whole_number(form.get("sample"), "sample", 60)
                )
            elif what == "floor":
                await self.api(session).set_min_confidence(probability(form.get("min_confidence")))
                return redirect_done("/settings", "settings")
            elif what == "floor-reset":
                await self.api(session).set_min_confidence(None)
                return redirect_done("/settings", "settings")
            elif what == "recalibration-reset":
                await self.api(session).reset_recalibration()
                return redirect_done("/settings", "settings")
            elif what == "log-bounds":
                await self.api(session).set_log_bounds(
                    whole_number(form.get("query_rate_per_minute"), "query_rate_per_minute"),
                    whole_number(form.get("retrieval_rows_per_day"), "retrieval_rows_per_day"),
                )
                return redirect_done("/settings", "settings")
            else:
                days = whole_number(form.get("episodic_ttl_days"), "episodic_ttl_days")
                await self.api(session).set_episodic_ttl_days(days)
                return redirect_done("/settings", "settings")
        return self.render(
            request,
            session,
            "settings.html",
            settings=await self.api(session).settings(),
            calibration=calibration,
        )

    # -- topology and growth ---------------------------------------------------------

    async def topology(self, request: Request, session: Session) -> Response:
        """The organization's services first (incident nodes apart), and on arrival the
        first service's picture: what depends on it and what it depends on."""
        params = dict(request.query_params)
        nodes = (await self.api(session).topology_nodes(TOPOLOGY_NODES_SHOWN))["nodes"]
        services = [n for n in nodes if n["node_type"] == "Service"]
        incidents = [n for n in nodes if n["node_type"] == "Incident"]
        others = [n for n in nodes if n["node_type"] not in ("Service", "Incident")]
        if not params.get("id", "").strip() and services:  # a picture on arrival
            params |= {"type": "Service", "id": services[0]["external_id"]}
        service = params.get("id", "").strip()
        radius = dependencies = criticality = picture = dependency_picture = None
        if service:
            query: dict[str, Any] = {
                "type": params.get("type") or "Service",
                "id": service,
                "hops": whole_number(params.get("hops"), "hops", 3),
            }
            if params.get("as_of"):
                query["as_of"] = params["as_of"]
            if params.get("namespaces"):
                query["namespaces"] = params["namespaces"]
            radius = await self.api(session).blast_radius(query)
            dependencies = await self.api(session).dependencies(query)
            criticality = await self.api(session).criticality(query)
            picture = blast_radius_picture(radius)
            dependency_picture = blast_radius_picture(dependencies)
        return self.render(
            request,
            session,
            "topology.html",
            query=params,
            radius=radius,
            dependencies=dependencies,
            criticality=criticality,
            picture=picture,
            dependency_picture=dependency_picture,
            nodes=nodes,
            listed=[*services, *others],
            incidents=incidents,
            cut=len(nodes) >= TOPOLOGY_NODES_SHOWN,
            # the types its nodes have (the console is the API's client: no domain import)
            node_types=sorted({n["node_type"] for n in nodes} | {"Service"}),
        )

    async def growth(self, request: Request, session: Session) -> Response:
        growth = await self.api(session).growth()
        return self.render(
            request, session, "growth.html", growth=growth, chart=weekly_chart(growth["weeks"])
        )


async def _attempt(call: Awaitable[dict[str, Any]], chosen: str) -> dict[str, Any]:
    """One action of a bulk one: done, or the API's refusal of it (the others go on)."""
    try:
        await call
    except GrandboHTTPError as exc:
        return {"chosen": chosen, "done": False, "message": str(exc.body.get("message", exc))}
    return {"chosen": chosen, "done": True, "message": ""}


async def _favicon(request: Request) -> Response:
    return FileResponse(CONSOLE_DIR / "static" / "favicon.svg", media_type="image/svg+xml")


def create_console(backend: ConsoleBackend, doors: ConsoleDoors) -> Starlette:
    """The console's ASGI app (served by uvicorn on loopback: `grandbo console`)."""
    console = Console(backend, doors)
    entries = EntryPages(console)
    people = PeoplePages(console)
    page = console.page
    routes = [
        Route("/login", console.login, methods=["GET", "POST"]),
        Route("/logout", page(console.logout), methods=["POST"]),
        Route("/", page(console.search)),
        Route("/why", page(console.why)),
        Route("/entries", page(entries.entries)),
        Route("/entries/new", page(entries.new_entry), methods=["GET", "POST"]),
        Route("/entries/{entry_id:uuid}", page(entries.entry)),
        Route("/entries/{entry_id:uuid}/{action}", page(entries.act), methods=["POST"]),
        Route("/picker", page(entries.picker)),
        Route("/review", page(console.review)),
        Route("/review/bulk", page(console.review_bulk), methods=["POST"]),
        Route("/incidents", page(console.incidents)),
        Route("/incidents/remove-question", page(console.remove_question), methods=["POST"]),
        Route("/incidents/remove-verdict", page(console.remove_verdict), methods=["POST"]),
        Route("/incidents/remove-note", page(console.remove_note), methods=["POST"]),
        Route("/unanswered", page(console.unanswered)),
        Route("/health", page(console.health), methods=["GET", "POST"]),
        Route("/settings", page(console.settings), methods=["GET", "POST"]),
        Route("/topology", page(console.topology)),
        Route("/growth", page(console.growth)),
        Route("/people", page(people.people)),
        Route("/people", page(people.act), methods=["POST"]),
        Route("/favicon.ico", _favicon),
        Mount("/static", StaticFiles(directory=CONSOLE_DIR / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(DoorsMiddleware, doors=doors)])


def _removal_reason(form: FormData) -> str:
    reason = text_of(form, "reason")
    if not reason:
        raise ConsoleError(400, "a removal needs its reason", "reason")
    return reason


def _incident_page(form: FormData) -> str:
    """The page of the incident a removal was made from (the incidents' list if none)."""
    incident_id = text_of(form, "incident_id")[:200]
    return "/incidents?" + urlencode({"id": incident_id}) if incident_id else "/incidents"
