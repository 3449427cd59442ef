"""Sign-in link tokens never reach a log (docs/operations.md, "Logs").

The one-time links of a password reset, an invite, `bootstrap` and `password_link` are
all `/password-reset/<uidb64>/<token>/`, valid for days until used: whoever reads a log
line with one could set the account's password. Every line is redacted where it is
written: gunicorn's access and error logs (`GunicornLogger`, gunicorn's `logger_class`)
and every Django log line (`TokenLinkFilter` on the console handler). The shape stays
readable: `/password-reset/MQ/<redacted>/`.

Imported by gunicorn's master before Django is set up: no Django import here."""

from __future__ import annotations

import logging
from typing import Any

import re2
from gunicorn.glogging import Logger

# Route parameters that hold a secret; tests/memoryhub/test_log_redaction.py walks the
# URLconf and fails if a route with one of them is not redacted below.
SECRET_ROUTE_PARAMETERS = frozenset({"token"})
REDACTED = "<redacted>"
# Where Django's PasswordResetConfirmView sends the browser once it has put the token in
# the session: not a secret, kept readable.
_NOT_A_TOKEN = b"set-password"

# `/password-reset/<uidb64>/<token>` anywhere in a line (the request line, the path, the
# Referer, a message); a segment ends at `/`, `?`, `#`, a quote or whitespace.
_TOKEN_LINK = re2.compile(rb'(/password-reset/[^/?#"\s]+/)([^/?#"\s]+)')


def redact_token_links(text: str) -> str:
    if "/password-reset/" not in text:
        return text
    data = text.encode("utf-8", "surrogatepass")
    pieces: list[bytes] = []
    end = 0
    for match in _TOKEN_LINK.finditer(data):
        if match.group(2) == _NOT_A_TOKEN:
            continue
        pieces += (data[end : match.start(2)], REDACTED.encode())
        end = match.end(2)
    if not pieces:
        return text
    pieces.append(data[end:])
    return b"".join(pieces).decode("utf-8", "surrogatepass")


class TokenLinkFilter(logging.Filter):
    """Redacts sign-in link tokens in a record's message (and its traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        cleaned = redact_token_links(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_token_links(record.exc_text)
        return True


class GunicornLogger(Logger):
    """gunicorn's logger with the filter on its access and error logs (an error line
    names the request's URI: "Error handling request /password-reset/...")."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            if not any(isinstance(found, TokenLinkFilter) for found in log.filters):
                log.addFilter(TokenLinkFilter())
