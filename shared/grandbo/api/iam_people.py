"""People signed in with their organization's identity: the admin routes under
`/v1/iam/admin/...`, which API Gateway authorizes with AWS's own signature (SigV4, the
method's authorization type AWS_IAM) before the admin function runs.

A person signs in through IAM Identity Center and gets a permission set's role; the
stack keeps which permission set stands for which organization and role (the mapping,
`GRANDBO_IAM_PEOPLE`). The caller's identity comes from the request API Gateway verified:
`requestContext.identity.userArn`, an assumed role

    arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_GrandboAcmeCurator_0a1b2c3d4e5f6a7b/ann@example.com

whose role name names the permission set (Identity Center names the role it creates in
an account `AWSReservedSSO_<permission set>_<unique suffix>`, a 16-hex-digit suffix in
AWS's examples: https://docs.aws.amazon.com/singlesignon/latest/userguide/referencingpermissionsets.html)
and whose session name is the person's Identity Center user name (their e-mail address).
The role must be one of the stack's own account: a role of the same name in another
account is another organization's doing, whatever a resource policy later lets in.
Nothing a request body says chooses the organization or the role. The HMAC keys stay for
automation and for local use.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from grandbo.api.auth import Caller, Email, PersonRole
from grandbo.api.people import person_key_id
from grandbo.errors import AuthenticationError, GrandboError
from grandbo.tenancy import require_tenant

IAM_PREFIX = "/v1/iam"
_ASSUMED_ROLE = re.compile(
    r"^arn:aws[a-z-]*:sts::(?P<account>[0-9]{12}):assumed-role/"
    r"(?P<role>[\w+=,.@-]{1,64})/(?P<session>[\w+=,.@-]{2,64})$"
)
# AWSReservedSSO_<permission set name (1..32 of [\w+=,.@-])>_<unique suffix>
_IDENTITY_CENTER_ROLE = re.compile(
    r"^AWSReservedSSO_(?P<permission_set>[\w+=,.@-]{1,32})_(?P<suffix>[0-9a-f]{16})$"
)


class PermissionSetAccess(BaseModel):
    """One permission set: the organization its people belong to, and their role."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    permission_set: Annotated[str, StringConstraints(pattern=r"^[\w+=,.@-]{1,32}$")]
    tenant_id: str
    role: PersonRole


class IamPeople(BaseModel):
    """The stack's mapping (GRANDBO_IAM_PEOPLE): permission sets to organizations and roles."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    permission_sets: list[PermissionSetAccess] = Field(default_factory=list, max_length=500)

    @classmethod
    def from_json(cls, document: str | None) -> IamPeople:
        if not document:
            return cls()
        try:
            mapping = cls.model_validate_json(document)
        except ValidationError as exc:
            problems = exc.error_count()
            raise GrandboError(f"GRANDBO_IAM_PEOPLE is malformed: {problems} error(s)") from None
        for access in mapping.permission_sets:
            require_tenant(access.tenant_id)
        names = [access.permission_set for access in mapping.permission_sets]
        if len(set(names)) != len(names):
            raise GrandboError("GRANDBO_IAM_PEOPLE names a permission set twice")
        return mapping

    def caller(self, user_arn: object, account_id: str) -> Caller:
        """The person an IAM-verified caller is, or AuthenticationError (not an Identity
        Center role of `account_id`, the stack's own, or a permission set the stack does
        not map)."""
        match = _ASSUMED_ROLE.fullmatch(user_arn) if isinstance(user_arn, str) else None
        if match is None:
            raise AuthenticationError("not an assumed role's session")
        if match.group("account") != account_id:
            raise AuthenticationError("a role of another account")
        role_name, session = match.group("role"), match.group("session")
        role = _IDENTITY_CENTER_ROLE.fullmatch(role_name)
        if role is None:
            raise AuthenticationError("not an IAM Identity Center role")
        permission_set = role.group("permission_set")
        access = next((a for a in self.permission_sets if a.permission_set == permission_set), None)
        if access is None:
            raise AuthenticationError(f"permission set {permission_set} is not mapped")
        try:
            person = _person(session)
        except ValidationError:
            raise AuthenticationError("the session name is not a person's address") from None
        return Caller(
            tenant_id=access.tenant_id,
            # no address in it (a key id is logged with every request)
            key_id=f"iam-{person_key_id(access.tenant_id, person)}",
            via="iam",
            person=person,
            person_role=access.role,
        )


class _Session(BaseModel):
    person: Email


def _person(session: str) -> str:
    return _Session(person=session).person
