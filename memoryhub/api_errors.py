"""One JSON error shape for every 4xx: {"error": code, "detail": message, ...extra}.

Also the strict JSON parser: bounded body size, valid UTF-8, no NUL bytes or lone
surrogates anywhere (PostgreSQL text cannot hold them, so they would otherwise
surface as 500s deep in a write)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import set_rollback

from memoryhub.lib.errors import DomainError


class RequestTooLarge(drf.APIException):
    status_code = 413
    default_detail = "request body is too large"
    default_code = "body_too_large"


class MalformedJSON(drf.ParseError):
    default_code = "malformed_json"


class ForbiddenCharacters(drf.ParseError):
    default_code = "invalid_characters"


def check_clean_text(value: str, where: str = "input") -> None:
    if "\x00" in value:
        raise ForbiddenCharacters(f"NUL bytes are not allowed in {where}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ForbiddenCharacters(f"{where} contains characters that are not valid UTF-8") from None


def _check_json_strings(node: Any) -> None:
    if isinstance(node, str):
        check_clean_text(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            check_clean_text(key)
            _check_json_strings(value)
    elif isinstance(node, list):
        for value in node:
            _check_json_strings(value)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.MAX_REQUEST_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"request body is larger than {limit} bytes")
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError:
            raise MalformedJSON("request body is not valid UTF-8") from None
        except ValueError as exc:
            raise MalformedJSON(f"malformed JSON: {exc}") from None
        _check_json_strings(data)
        return data


_DRF_CODES: list[tuple[type[Exception], str]] = [
    (MalformedJSON, "malformed_json"),
    (ForbiddenCharacters, "invalid_characters"),
    (RequestTooLarge, "body_too_large"),
    (drf.ValidationError, "invalid"),
    (drf.ParseError, "malformed_json"),
    (drf.NotAuthenticated, "unauthenticated"),
    (drf.AuthenticationFailed, "unauthenticated"),
    (drf.PermissionDenied, "forbidden"),
    (drf.NotFound, "not_found"),
    (drf.MethodNotAllowed, "method_not_allowed"),
    (drf.NotAcceptable, "not_acceptable"),
    (drf.UnsupportedMediaType, "unsupported_media_type"),
    (drf.Throttled, "throttled"),
]


def error_body(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail, **extra}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    view = context.get("view")
    headers: dict[str, str] = {}
    if isinstance(exc, DomainError):
        extra = {name: _serialize_extra(view, name, value) for name, value in exc.extra.items()}
        set_rollback()
        return Response(error_body(exc.code, exc.detail, **extra), status=exc.status)
    if isinstance(exc, Http404):
        exc = drf.NotFound("not found")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if not isinstance(exc, drf.APIException):
        return None  # a real bug: let Django answer 500 and log it

    code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), "error")
    extra: dict[str, Any] = {}
    if isinstance(exc, drf.ValidationError):
        detail = "the request did not validate"
        extra["fields"] = exc.detail
    else:
        detail = str(exc.detail)
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if isinstance(exc, drf.Throttled) and exc.wait is not None:
        headers["Retry-After"] = str(int(exc.wait))
    set_rollback()
    return Response(error_body(code, detail, **extra), status=exc.status_code, headers=headers)


def _serialize_extra(view: Any, name: str, value: Any) -> Any:
    serialize = getattr(view, "serialize_error_extra", None)
    return serialize(name, value) if serialize else value


def json_404(request: Any, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("not_found", "not found"), status=404)


def json_500(request: Any) -> JsonResponse:
    return JsonResponse(error_body("server_error", "internal error"), status=500)


def json_400(request: Any, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("bad_request", "bad request"), status=400)


def json_403(request: Any, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("forbidden", "forbidden"), status=403)
