"""The console's people page, an admin's: the organization's people with their roles,
added with a role (or their role changed), given a new sign-in link, their key renewed,
removed; its service keys and the IAM Identity Center permission sets mapped to it. Each
change is one signed request of the admin's own (`/v1/admin/people`); a sign-in link is
shown once, on the page that made it, never in an address."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from grandbo.api.people import DEFAULT_LINK_DAYS, MAX_LINK_DAYS, ROLES
from grandbo.console.base import ConsoleBase
from grandbo.console.forms import ConsoleError, redirect_done, text_of, whole_number
from grandbo.console.security import Session

ADMIN_ONLY = "the people page is an admin's: ask an admin of the organization"


class PeoplePages:
    """The people page, rendered and signed by its `ConsoleBase`."""

    def __init__(self, console: ConsoleBase) -> None:
        self.console = console

    def _admin(self, session: Session) -> None:
        if self.console.role_of(session) != "admin":
            raise ConsoleError(403, ADMIN_ONLY)

    async def people(self, request: Request, session: Session) -> Response:
        self._admin(session)
        return await self._page(request, session)

    async def _page(
        self, request: Request, session: Session, *, made: dict[str, object] | None = None
    ) -> Response:
        listing = await self.console.api(session).people()
        return self.console.render(
            request,
            session,
            "people.html",
            listing=listing,
            made=made,
            roles=ROLES,
            link_days=DEFAULT_LINK_DAYS,
            max_link_days=MAX_LINK_DAYS,
        )

    async def act(self, request: Request, session: Session) -> Response:
        """add, link, revoke or remove, as the form says; a link made is shown once."""
        self._admin(session)
        form = await request.form()
        what, email = text_of(form, "what"), text_of(form, "email")
        if not email:
            raise ConsoleError(400, "name the person by their e-mail address", "email")
        api = self.console.api(session)
        if what in ("add", "link"):
            days = whole_number(form.get("link_days"), "link_days", DEFAULT_LINK_DAYS)
            if what == "add":
                role = text_of(form, "role")
                if role not in ROLES:
                    raise ConsoleError(400, f"role must be one of {', '.join(ROLES)}", "role")
                answer = await api.add_person(email, role, days)
            else:
                answer = await api.link_person(email, days)
            login = str(request.base_url).rstrip("/") + "/login?token=" + answer["sign_in_token"]
            made = {"what": what, "person": answer["person"], "link": login, "days": days}
            return await self._page(request, session, made=made)
        if what in ("revoke", "remove") and text_of(form, "confirm") != "yes":
            # one click must not end someone's access: the form's box says "sure"
            raise ConsoleError(400, f"tick 'sure' to {what} {email}", "confirm")
        if what == "revoke":
            await api.revoke_person(email)
            return redirect_done("/people", "person_revoked")
        if what == "remove":
            await api.remove_person(email)
            return redirect_done("/people", "person_removed")
        raise ConsoleError(400, "the action is add, link, revoke or remove", "what")
