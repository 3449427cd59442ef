"""Pages that manage the team: vault, agent tokens, members, the audit log and the
owner's shutdown. Reading the vault (masked) and the member list is for everyone in
the team; every change needs the admin role, shutting down needs the owner."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from core.errors import DomainError, NotFound
from dashboard import selectors
from dashboard.access import (
    Role,
    TeamAccess,
    forbidden,
    page_context,
    path_key,
    person_actor,
    signed_in_user_id,
    team_page,
)
from dashboard.forms import (
    MemberAddForm,
    MemberRoleForm,
    ShutdownForm,
    TokenCreateForm,
    VaultRotateForm,
    VaultSetForm,
)
from teams import accounts, memberships, services
from teams.models import Membership, VaultEntry
from teams.selectors import (
    get_membership,
    get_token,
    get_vault_entry,
    list_memberships,
    list_tokens,
    list_vault_entries,
)


def _url(name: str, access: TeamAccess, **kwargs: object) -> str:
    return reverse(f"dashboard:{name}", kwargs={"slug": access.team.slug, **kwargs})


# --- vault -----------------------------------------------------------------------------


@team_page()
def vault(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    """Keys and non-secret values; secrets masked. Admins also set entries here."""
    form, status = VaultSetForm(), 200
    if request.method == "POST":
        if not access.can_admin:
            return forbidden(request, access, Role.ADMIN)
        form, status = VaultSetForm(request.POST), 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                services.set_vault_entry(
                    team=access.team,
                    key=data["key"],
                    value=data["value"],
                    is_secret=data["is_secret"],
                    actor=person_actor(request),
                    only_new=True,
                    may_change_secrets=access.can_admin,
                )
            except DomainError as error:
                form.add_domain_error(error, default_field="key")
            else:
                messages.success(request, f"Vault entry \u201c{data['key']}\u201d set.")
                return redirect(_url("vault", access))
        if form.errors and form.data.get("is_secret"):
            # A secret typed into a form that failed is not sent back to the browser.
            data = request.POST.copy()
            data["value"] = ""
            form.data = data
    entries = list_vault_entries(team=access.team)
    return render(
        request, "dashboard/vault.html", page_context(access, entries=entries, form=form), status=status
    )


def _vault_entry(access: TeamAccess, key: str) -> VaultEntry:
    return get_vault_entry(team=access.team, key=path_key(key))


@team_page(Role.ADMIN)
def vault_rotate(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    entry = _vault_entry(access, key)
    status = 200
    if request.method == "POST":
        form, status = VaultRotateForm(request.POST), 400
        if form.is_valid():
            try:
                services.set_vault_entry(
                    team=access.team,
                    key=key,
                    value=form.cleaned_data["value"],
                    is_secret=entry.is_secret,
                    actor=person_actor(request),
                    may_change_secrets=access.can_admin,
                )
            except DomainError as error:
                form.add_domain_error(error, default_field="value")
            else:
                verb = "rotated" if entry.is_secret else "updated"
                messages.success(request, f"Vault entry \u201c{key}\u201d {verb}.")
                return redirect(_url("vault", access))
    else:
        form = VaultRotateForm(initial={"value": "" if entry.is_secret else entry.value})
    return render(
        request, "dashboard/vault_rotate.html", page_context(access, entry=entry, form=form), status=status
    )


@team_page(Role.ADMIN)
def vault_delete(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    entry = _vault_entry(access, key)
    if request.method == "POST":
        services.delete_vault_entry(
            team=access.team, key=key, actor=person_actor(request), may_change_secrets=access.can_admin
        )
        messages.success(request, f"Vault entry \u201c{key}\u201d deleted.")
        return redirect(_url("vault", access))
    return render(request, "dashboard/vault_delete.html", page_context(access, entry=entry))


@team_page(Role.ADMIN, reveals_secret=True)
@require_POST
@never_cache
def vault_reveal(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    """The one page that shows a secret: admins only, POST only (no link prefetch or
    history can trigger it), never cached, and recorded in the audit log first."""
    entry, value = services.reveal_vault_entry(
        team=access.team, key=path_key(key), actor=person_actor(request), may_reveal_secrets=access.can_admin
    )
    return render(request, "dashboard/vault_reveal.html", page_context(access, entry=entry, value=value))


# --- tokens ------------------------------------------------------------------------------


@team_page(Role.VIEWER)
@never_cache
def tokens(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    """Admins manage the team's tokens and their own; everyone else only their own."""
    form, status, issued = TokenCreateForm(), 200, None
    if request.method == "POST":
        form, status = TokenCreateForm(request.POST), 400
        if form.is_valid():
            personal = form.cleaned_data["personal"] or not access.can_admin
            try:
                issued = services.create_token(
                    team=access.team,
                    name=form.cleaned_data["name"],
                    scopes=sorted(form.cleaned_data["scopes"]),
                    actor=person_actor(request),
                    user_id=signed_in_user_id(request) if personal else None,
                )
            except DomainError as error:
                form.add_domain_error(error, default_field="name")
            else:
                # Rendered, not redirected: the raw token exists only in this response.
                form, status = TokenCreateForm(), 201
    shown = list_tokens(team=access.team, user_id=None if access.can_admin else signed_in_user_id(request))
    context = page_context(access, tokens=shown, form=form, issued=issued)
    return render(request, "dashboard/tokens.html", context, status=status)


@team_page(Role.VIEWER)
def token_revoke(request: HttpRequest, access: TeamAccess, token_id: int) -> HttpResponse:
    token = get_token(team=access.team, token_id=token_id)
    if not access.can_admin and token.user_id != signed_in_user_id(request):
        return forbidden(request, access, Role.ADMIN)
    if request.method == "POST":
        try:
            services.revoke_token_by_id(team=access.team, token_id=token_id, actor=person_actor(request))
        except DomainError as error:
            messages.error(request, error.detail)
        else:
            messages.success(request, f"Token \u201c{token.name}\u201d revoked.")
        return redirect(_url("tokens", access))
    return render(request, "dashboard/token_revoke.html", page_context(access, token=token))


# --- members ----------------------------------------------------------------------------------


@team_page()
@never_cache
def members(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    form, status, invited = MemberAddForm(), 200, None
    if request.method == "POST":
        if not access.can_admin:
            return forbidden(request, access, Role.ADMIN)
        form, status = MemberAddForm(request.POST), 400
        if form.is_valid():
            username, role = form.cleaned_data["username"].strip(), form.cleaned_data["role"]
            try:
                # An unknown name or address is answered like an add (the form must not
                # tell who has an account) unless the admin asked to create the account.
                invited = accounts.invite(
                    team=access.team,
                    who=username,
                    role=role,
                    create_account=form.cleaned_data["create_account"],
                    by=access.membership,
                    base_url=request.build_absolute_uri("/"),
                )
            except DomainError as error:
                form.add_domain_error(error, default_field="username")
            if invited is not None and invited.link:
                # Rendered, not redirected: the one-time link exists only in this response.
                form, status = MemberAddForm(), 201
            elif not form.errors:
                messages.success(
                    request,
                    f"If an account named \u201c{username}\u201d exists, it is now a {role} of this team "
                    "(the list below shows who is).",
                )
                return redirect(_url("members", access))
    rows = list_memberships(team=access.team)
    context = page_context(
        access, rows=rows, form=form, role_choices=Membership.Role.choices, invited=invited
    )
    return render(request, "dashboard/members.html", context, status=status)


@team_page(Role.ADMIN)
@require_POST
def member_role(request: HttpRequest, access: TeamAccess, membership_id: int) -> HttpResponse:
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose one of the roles.")
        return redirect(_url("members", access))
    try:
        membership = memberships.change_member_role(
            team=access.team,
            membership_id=membership_id,
            role=form.cleaned_data["role"],
            by=access.membership,
        )
    except NotFound:
        raise
    except DomainError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"{membership.user.get_username()} is now {membership.role}.")
    return redirect(_url("members", access))


@team_page(Role.ADMIN)
def member_remove(request: HttpRequest, access: TeamAccess, membership_id: int) -> HttpResponse:
    membership = get_membership(team=access.team, membership_id=membership_id)
    if request.method == "POST":
        try:
            memberships.remove_member(team=access.team, membership_id=membership_id, by=access.membership)
        except DomainError as error:
            messages.error(request, error.detail)
        else:
            messages.success(request, f"{membership.user.get_username()} removed from the team.")
            if membership.pk == access.membership.pk:
                return redirect("dashboard:home")
        return redirect(_url("members", access))
    return render(request, "dashboard/member_remove.html", page_context(access, row=membership))


# --- audit log and shutdown ----------------------------------------------------------------------


@team_page(Role.ADMIN)
def audit_log(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    page = Paginator(selectors.list_audit_events(team=access.team), 50).get_page(request.GET.get("page"))
    return render(request, "dashboard/audit_log.html", page_context(access, page=page))


@team_page(Role.OWNER)
def shutdown(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    """Delete the team and everything it holds, after the owner types its slug."""
    team = access.team
    status = 200
    form = ShutdownForm(request.POST or None, slug=team.slug)
    if request.method == "POST":
        status = 400
        if form.is_valid():
            counts = services.shutdown_team(team=team, actor=person_actor(request))
            messages.success(
                request,
                f"Team \u201c{team.name}\u201d was shut down ({counts['memories']} memories deleted).",
            )
            return redirect("dashboard:home")
    context = page_context(access, form=form, counts=selectors.memory_counts(team=team))
    return render(request, "dashboard/shutdown.html", context, status=status)
