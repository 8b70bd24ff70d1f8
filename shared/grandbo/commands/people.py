"""`grandbo people add|list|remove|revoke|link`: the organization's people in the local
keyring, each with their own key, role and console sign-in link (`grandbo.api.people`).
Each names an organization that exists (`grandbo.local.organizations`); `add` makes a new
one only with `--create-tenant`."""

from __future__ import annotations

import argparse
import json
import sys

from grandbo.api import people_keyring as local_people
from grandbo.api.auth import SigningKey
from grandbo.api.people import DEFAULT_LINK_DAYS, MAX_LINK_DAYS, ROLES, mint_sign_in_token
from grandbo.commands.common import (
    add_create_tenant,
    keyring_path,
    require_named_organization,
    settings_from,
)
from grandbo.local.demo import DEMO_TENANT
from grandbo.local.serving import CONSOLE_URL, console_url, default_note

DEFAULT_CONSOLE = CONSOLE_URL


def _link_days(text: str) -> int:
    """--days, checked as it is parsed: a bad value refuses the command before the keyring
    is touched (`add` writes the person, then mints their link)."""
    try:
        days = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days") from None
    if not 1 <= days <= MAX_LINK_DAYS:
        raise argparse.ArgumentTypeError(f"a sign-in link lasts 1..{MAX_LINK_DAYS} days")
    return days


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "people",
        help="the organization's people: their roles, keys and console sign-in links",
        description="viewer reads; curator also corrects, retires, merges, splits and "
        "gives verdicts; admin also redacts, purges, changes settings and manages people.",
    )
    actions = parser.add_subparsers(dest="people_command", required=True)

    def action(name: str, help_text: str, *, email: bool = True) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help_text)
        if email:
            p.add_argument("email", help="the person's e-mail address")
        p.add_argument("--tenant", default=DEMO_TENANT, help="the organization (default: demo)")
        return p

    def with_link(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--console",
            default=None,
            help="the console's address (default: where the runner serving this data "
            f"directory serves it, else {DEFAULT_CONSOLE})",
        )
        p.add_argument(
            "--days",
            type=_link_days,
            default=DEFAULT_LINK_DAYS,
            help=f"how long the link works (1..{MAX_LINK_DAYS} days)",
        )

    add = action("add", "add a person, or change their role (a new key); prints a sign-in link")
    add.add_argument("--role", required=True, choices=ROLES, help="what they may do")
    add_create_tenant(add, "this person is its first key")
    with_link(add)
    listing = action("list", "the organization's people and service keys", email=False)
    listing.add_argument("--json", action="store_true", help="as JSON")
    action("remove", "remove a person: their next request is refused")
    action("revoke", "renew a person's key: their links and sessions end")
    link = action("link", "a new console sign-in link for a person")
    with_link(link)


def _link(args: argparse.Namespace, key: SigningKey) -> str:
    """A sign-in link to the console (a credential for `--days`): where no runner serves
    and none was named, it points at the default address, and says so on stderr."""
    token = mint_sign_in_token(key, days=args.days)
    data_dir = settings_from(args).data_dir
    console = console_url(data_dir, args.console)
    note = default_note(data_dir, args.console)
    if note:
        print(
            f"grandbo people: {note} ({console}); start the console there, or name it "
            "with --console",
            file=sys.stderr,
        )
    return f"{console.rstrip('/')}/login?token={token}"


def _row(key: SigningKey) -> dict[str, object]:
    return {
        "email": key.person,
        "role": key.person_role,
        "key_id": key.key_id,
    }


def cmd_people(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    # the keyring answers for an onboarded organization; the store only for one it lacks
    require_named_organization(args, settings)
    path = keyring_path(settings)
    command = args.people_command
    if command == "list":
        people = local_people.people(path, args.tenant)
        services = local_people.services(path, args.tenant)
        if args.json:
            document = {
                "organization": args.tenant,
                "people": [_row(key) for key in people],
                "services": [
                    {"key_id": k.key_id, "roles": k.roles, "stands_for": k.stands_for}
                    for k in services
                ],
            }
            print(json.dumps(document, indent=2))
            return 0
        for key in people:
            print(f"{key.person}\t{key.person_role}\t{key.key_id}")
        for key in services:
            what = key.stands_for or "a service, not a person"
            print(f"(service)\t{','.join(key.roles)}\t{key.key_id}\t{what}")
        if not people:
            print(
                f"no people in {args.tenant} yet: "
                f"grandbo people add EMAIL --tenant {args.tenant} --role ROLE"
            )
        return 0
    if command == "add":
        key = local_people.add_person(path, args.tenant, args.email, args.role)  # same role: kept
        print(f"{key.person} is {key.person_role} of {args.tenant} (key {key.key_id})")
        print(f"  console sign-in link (works for {args.days} days): {_link(args, key)}")
        return 0
    if command == "remove":
        key = local_people.remove_person(path, args.tenant, args.email)
        print(f"removed {key.person} from {args.tenant}: their next request is refused")
        return 0
    if command == "revoke":
        key = local_people.renew_person(path, args.tenant, args.email)
        print(f"renewed {key.person}'s key: their links and sessions have ended")
        return 0
    key = local_people.person(path, args.tenant, args.email)
    print(_link(args, key))
    return 0
