"""What a locked-out sign-in sees (django-axes' AXES_LOCKOUT_CALLABLE): the sign-in page
again, saying why and for how long, with 429. The admin's sign-in shares it."""

from __future__ import annotations

from typing import Any

from axes.helpers import get_cool_off
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def lockout_message(request: HttpRequest) -> str:
    cool_off = get_cool_off(request)
    minutes = max(1, round(cool_off.total_seconds() / 60)) if cool_off else None
    wait = f"Try again in {minutes} minute{'s' if minutes != 1 else ''}" if minutes else "Ask an operator"
    return f"Too many failed sign-ins for this user from your address. {wait}."


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    context = {
        "form": AuthenticationForm(request),
        "next": request.POST.get("next", "") if request.method == "POST" else "",
        "lockout_message": lockout_message(request),
    }
    return render(request, "dashboard/login.html", context, status=429)
