"""Signing in and setting a password: Django's own auth views with the dashboard's
templates. "Forgot your password?" by e-mail is offered only when an e-mail server is
configured (EMAIL_URL); without one, `manage.py password_link` prints the same one-time
link. The reset form answers alike whether or not an account has the address."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render
from django.urls import reverse_lazy


def email_enabled() -> bool:
    return bool(settings.MEMORYHUB_EMAIL_ENABLED)


class LoginView(auth_views.LoginView):
    template_name = "dashboard/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "email_enabled": email_enabled()}


class PasswordResetView(auth_views.PasswordResetView):
    template_name = "dashboard/password_reset.html"
    email_template_name = "dashboard/password_reset_email.txt"
    subject_template_name = "dashboard/password_reset_subject.txt"
    success_url = reverse_lazy("dashboard:password_reset_done")

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not email_enabled():
            # Nothing to send with: say who can help instead of pretending to send.
            return render(request, self.template_name, {"email_enabled": False}, status=404)
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "email_enabled": True}


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    template_name = "dashboard/password_reset_done.html"


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """What every one-time link opens: the e-mailed ones and the ones that
    `bootstrap`, `add_member --create`, `password_link` and the Members page print."""

    template_name = "dashboard/password_reset_confirm.html"
    success_url = reverse_lazy("dashboard:password_reset_complete")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "email_enabled": email_enabled()}


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "dashboard/password_reset_complete.html"
