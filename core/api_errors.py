"""One JSON error shape for every 4xx: {"error": code, "detail": message, ...extra},
and its OpenAPI description.

Also the strict JSON parser: bounded body size and nesting depth, valid UTF-8, finite
numbers, no NUL bytes or lone surrogates anywhere (PostgreSQL cannot hold them, and
deep nesting exhausts the stack of every recursive step after parsing, so each would
otherwise surface as a 500 deep in a write or a render)."""

from __future__ import annotations

import json
import logging
import math
import sys
from typing import Any

import psycopg
from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpResponse, JsonResponse
from django.views import defaults
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions as drf
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import set_rollback

from core.errors import DomainError

logger = logging.getLogger("memoryhub.database")


class RequestTooLarge(drf.APIException):
    status_code = 413
    default_detail = "request body is too large"
    default_code = "body_too_large"


class MalformedJSON(drf.ParseError):
    default_code = "malformed_json"


class ForbiddenCharacters(drf.ParseError):
    default_code = "invalid_characters"


class NestedTooDeeply(drf.ParseError):
    default_code = "too_deeply_nested"


# Objects and arrays inside one another; memory metadata needs a handful at most.
MAX_JSON_DEPTH = 32


def check_clean_text(value: str, where: str = "input") -> None:
    if "\x00" in value:
        raise ForbiddenCharacters(f"NUL bytes are not allowed in {where}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ForbiddenCharacters(f"{where} contains characters that are not valid UTF-8") from None


def _check_json_strings(node: Any, depth: int = 0) -> None:
    if isinstance(node, str):
        check_clean_text(node)
        return
    if not isinstance(node, dict | list):
        return
    if depth >= MAX_JSON_DEPTH:
        raise NestedTooDeeply(f"JSON is limited to {MAX_JSON_DEPTH} levels of nesting")
    if isinstance(node, dict):
        for key, value in node.items():
            check_clean_text(key)
            _check_json_strings(value, depth + 1)
    else:
        for value in node:
            _check_json_strings(value, depth + 1)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _parse_finite_float(text: str) -> float:
    # json accepts 1e400 and gives inf, which neither PostgreSQL's jsonb nor a strict
    # JSON renderer can take back.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:32]} is out of range")
    return value


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.MAX_REQUEST_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"request body is larger than {limit} bytes")
        try:
            data = json.loads(
                raw.decode("utf-8"), parse_constant=_reject_constant, parse_float=_parse_finite_float
            )
        except UnicodeDecodeError:
            raise MalformedJSON("request body is not valid UTF-8") from None
        except ValueError as exc:
            raise MalformedJSON(f"malformed JSON: {exc}") from None
        except RecursionError:
            raise NestedTooDeeply(f"JSON is limited to {MAX_JSON_DEPTH} levels of nesting") from None
        _check_json_strings(data)
        return data


_DRF_CODES: list[tuple[type[Exception], str]] = [
    (MalformedJSON, "malformed_json"),
    (ForbiddenCharacters, "invalid_characters"),
    (NestedTooDeeply, "too_deeply_nested"),
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
    (drf.Throttled, "rate_limited"),
]


def error_body(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail, **extra}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    view = context.get("view")
    headers: dict[str, str] = {}
    if isinstance(exc, DomainError):
        set_rollback()
        return Response(domain_error_body(exc, view), status=exc.status)
    if isinstance(exc, Http404):
        exc = drf.NotFound("not found")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if not isinstance(exc, drf.APIException):
        # A real bug: Django answers 500 and logs it. Or the database is down or saturated:
        # leaving it to propagate rolls back (or drops) the request's transaction before
        # `json_500` answers 503, where it is answered for every other view too.
        return None

    code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), "error")
    extra: dict[str, Any] = {}
    if isinstance(exc, drf.ValidationError):
        detail = "the request did not validate"
        # Always an object: a bare message (a list) is about the input as a whole.
        fields = exc.detail
        extra["fields"] = fields if isinstance(fields, dict) else {"non_field_errors": fields}
    else:
        detail = str(exc.detail)
    # APIView.handle_exception attaches the authenticator's challenge to the exception.
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    if isinstance(exc, drf.Throttled):
        wait: float | None = exc.wait  # type: ignore[attr-defined]  # DRF sets it; drf-stubs omit it
        if wait is not None:
            # Whole seconds, rounded up: a client that waits this long is let through.
            retry_after = max(1, math.ceil(wait))
            headers["Retry-After"] = str(retry_after)
            extra["retry_after"] = retry_after
            detail = f"too many requests; retry in {retry_after} seconds"
    set_rollback()
    return Response(error_body(code, detail, **extra), status=exc.status_code, headers=headers)


def domain_error_body(exc: DomainError, view: Any = None) -> dict[str, Any]:
    """The one error shape of a domain error (its extras rendered by the view)."""
    domain_extra = {name: _serialize_extra(view, name, value) for name, value in exc.extra.items()}
    # A domain error about one field reads like a validation error of that field.
    if "field" in domain_extra:
        domain_extra["fields"] = {domain_extra.pop("field"): [exc.detail]}
    return error_body(exc.code, exc.detail, **domain_extra)


def validation_error_body(exc: drf.ValidationError) -> dict[str, Any]:
    """The one error shape of a serializer's ValidationError (as the handler answers it)."""
    fields = exc.detail
    # Always an object: a bare message (a list) is about the input as a whole.
    fields = fields if isinstance(fields, dict) else {"non_field_errors": fields}
    return error_body("invalid", "the request did not validate", fields=fields)


def _serialize_extra(view: Any, name: str, value: Any) -> Any:
    serialize = getattr(view, "serialize_error_extra", None)
    return serialize(name, value) if serialize else value


API_PATH_PREFIX = "/api/"


def is_api_path(path: str) -> bool:
    """A path of the JSON API: its errors have the one error shape, and no page of
    people's uses it (core.browser_middleware)."""
    return path.startswith(API_PATH_PREFIX)


def json_404(request: Any, exception: Exception | None = None) -> HttpResponse:
    # People browsing the admin get Django's page; API clients get the error shape.
    if not is_api_path(request.path):
        return defaults.page_not_found(request, exception or Http404())
    return JsonResponse(error_body("not_found", "not found"), status=404)


def json_500(request: Any) -> HttpResponse:
    # Django calls the 500 handler inside the `except` block of the failure it answers.
    failure = sys.exc_info()[1]
    if failure is not None and is_database_unavailable(failure):
        return database_unavailable(request, failure)
    return JsonResponse(error_body("server_error", "internal error"), status=500)


def is_database_unavailable(exc: BaseException) -> bool:
    """The database cannot be reached, dropped the connection, or no pooled connection
    came free in time (psycopg_pool.PoolTimeout is an OperationalError): the request may
    succeed if sent again, so it answers 503, not 500."""
    return isinstance(exc, DATABASE_UNAVAILABLE_ERRORS)


# Django's wrappers, and psycopg's own for code that meets them unwrapped.
DATABASE_UNAVAILABLE_ERRORS = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)


DATABASE_UNAVAILABLE_PAGE = (
    "<!doctype html><html><head><title>Service unavailable</title></head><body>"
    "<h1>Service unavailable</h1><p>MemoryHub cannot reach its database right now; "
    "try again in a few seconds.</p></body></html>"
)


def database_unavailable(request: Any, exc: BaseException) -> HttpResponse:
    """503 with Retry-After: the one error shape for the API, a plain page for people.
    Says nothing of the database to the client; logs the cause once."""
    logger.error(
        "database unavailable, answered 503: %s %s: %s: %s",
        request.method,
        request.path,
        type(exc).__name__,
        str(exc).strip(),
    )
    retry_after: int = settings.DB_UNAVAILABLE_RETRY_AFTER_SECONDS
    response: HttpResponse
    if is_api_path(request.path):
        detail = "the database is temporarily unavailable; retry later"
        body = error_body("database_unavailable", detail, retry_after=retry_after)
        response = JsonResponse(body, status=503)
    else:
        response = HttpResponse(DATABASE_UNAVAILABLE_PAGE, status=503, content_type="text/html")
    response["Retry-After"] = str(retry_after)
    # Logged above, without a traceback: Django would log it again as a server error.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


def json_400(request: Any, exception: Exception | None = None) -> JsonResponse:
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse(error_body("body_too_large", "request body is too large"), status=413)
    return JsonResponse(error_body("bad_request", "bad request"), status=400)


def json_403(request: Any, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("forbidden", "forbidden"), status=403)


class ErrorSerializer(serializers.Serializer[dict[str, Any]]):
    """Every 4xx body. More members may follow `detail`, as named by the operation."""

    error = serializers.CharField(help_text="A short, stable code, e.g. `not_found` or `invalid`.")
    detail = serializers.CharField(help_text="What went wrong, for a person or an agent to read.")
    # The serializer's metaclass moves declared fields off the class, so this does not
    # shadow Serializer.fields at run time; the stubs cannot see that.
    fields = serializers.DictField(  # type: ignore[assignment]
        required=False, help_text="Validation messages per input field (`non_field_errors`: the whole body)."
    )
    retry_after = serializers.IntegerField(
        required=False, help_text="With 429: seconds to wait before retrying, as in the Retry-After header."
    )


ERROR_DESCRIPTIONS = {
    400: "Invalid input: a body, query parameter or path parameter that does not validate, "
    "malformed JSON, a bad cursor or limit.",
    401: "No token, or an unknown or revoked one.",
    403: "The token lacks the scope this action needs.",
    404: "No such object, or the team in the URL is not the token's team.",
    409: "The request conflicts with the current state.",
    413: "The request body is larger than the limit.",
    415: "The request body is not JSON.",
    429: "Rate limited: the token (or, without one, the client address) has used its budget "
    "of reads or writes for now. Retry after the seconds in the Retry-After header.",
}

# What every team-scoped operation may answer, whatever it does.
TEAM_SCOPED_ERRORS = (400, 401, 403, 404, 429)
# And what every operation that reads a body may answer as well.
BODY_ERRORS = (413, 415)


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """OpenAPI responses for error statuses, all in the one error shape."""
    return {
        status: OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[status])
        for status in statuses
    }
