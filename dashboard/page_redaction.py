"""A team's vault secrets out of a rendered page, and nothing but user content touched.

A secret that reached text before it entered the vault (an old memory, a note, a search
query echoed back) must not leave in a page; the page's own markup must never change,
whatever the secret: a secret equal to `name="csrfmiddlewaretoken"` or `hx-headers`
would otherwise turn every form's CSRF input into `[REDACTED:vault_secret]` and lock
the team out of the very form that removes it. So the page is read with a real HTML
parser (the standard library's tokenizer), and the team's matcher runs on:

- text nodes (what the page shows, textarea and option contents included), outside
  <script> and <style>, which are the templates' own code;
- the values of the attributes that carry user content (USER_CONTENT_ATTRIBUTES: a
  form field's value, a link, a title or label), except the CSRF input's value.

Tag names, attribute names, every other attribute value, comments and declarations are
copied as they are. A text node or a tag holding a secret is written back escaped (the
parser gives decoded text); nothing else is rewritten. Pages that hold no form of any
secret anywhere (most) are not parsed at all: one pass of the matcher decides.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

from teams.scrubber import SecretMatcher

# Attribute values that may hold what people and agents wrote (keys in links, a search
# query, a form's prefilled values, titles); the rest are the templates' own.
USER_CONTENT_ATTRIBUTES = frozenset(
    {"value", "href", "title", "alt", "placeholder", "aria-label", "aria-description", "label", "summary"}
)
_CSRF_FIELD = "csrfmiddlewaretoken"


def redact_page(page: str, matcher: SecretMatcher) -> tuple[str, int]:
    """The page with the matcher's secrets redacted from its text and user-content
    attribute values, and how many were."""
    if matcher.is_empty or not matcher.finds(page):
        return page, 0
    redactor = _PageRedactor(page, matcher)
    redactor.feed(page)
    redactor.close()
    if not redactor.edits:
        return page, 0
    pieces: list[str] = []
    end = 0
    for start, stop, replacement in redactor.edits:
        pieces += (page[end:start], replacement)
        end = stop
    pieces.append(page[end:])
    return "".join(pieces), redactor.redacted


class _PageRedactor(HTMLParser):
    """Collects edits as (start, end, replacement) offsets into the page, in order."""

    def __init__(self, page: str, matcher: SecretMatcher) -> None:
        super().__init__(convert_charrefs=True)
        self._matcher = matcher
        self._line_starts = [0]
        position = page.find("\n")
        while position >= 0:
            self._line_starts.append(position + 1)
            position = page.find("\n", position + 1)
        self._page_length = len(page)
        self._text: tuple[int, str] | None = None  # the text node being read: its start, its text
        self.edits: list[tuple[int, int, str]] = []
        self.redacted = 0

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    # Text: its raw span runs from where it starts to where the next token starts.

    def handle_data(self, data: str) -> None:
        if self.cdata_elem is not None:  # inside <script> or <style>
            return
        if self._text is None:
            self._text = (self._offset(), data)
        else:
            self._text = (self._text[0], self._text[1] + data)

    def _end_text(self) -> None:
        if self._text is None:
            return
        (start, text), self._text = self._text, None
        redacted, count = self._matcher.redact(text)
        if count:
            self.redacted += count
            self.edits.append((start, self._offset(), html.escape(redacted, quote=False)))

    def close(self) -> None:
        super().close()
        if self._text is not None:
            (start, text), self._text = self._text, None
            redacted, count = self._matcher.redact(text)
            if count:
                self.redacted += count
                self.edits.append((start, self._page_length, html.escape(redacted, quote=False)))

    # Tags: only a user-content attribute's value may change; the tag is then rewritten
    # from what the parser read, names as they were.

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._end_text()
        self._redact_tag(tag, attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._end_text()
        self._redact_tag(tag, attrs)

    def _redact_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or ""
        is_csrf_input = tag == "input" and ("name", _CSRF_FIELD) in attrs
        changed = False
        rewritten: list[tuple[str, str | None]] = []
        for name, value in attrs:
            if (
                value is not None
                and name in USER_CONTENT_ATTRIBUTES
                and not (is_csrf_input and name == "value")
            ):
                value, count = self._matcher.redact(value)
                if count:
                    self.redacted += count
                    changed = True
            rewritten.append((name, value))
        if not changed:
            return
        attributes = "".join(f" {n}" if v is None else f' {n}="{html.escape(v)}"' for n, v in rewritten)
        closing = "/>" if raw.rstrip().endswith("/>") else ">"
        start = self._offset()
        self.edits.append((start, start + len(raw), f"<{tag}{attributes}{closing}"))

    def handle_endtag(self, tag: str) -> None:
        self._end_text()

    def handle_comment(self, data: str) -> None:
        self._end_text()

    def handle_decl(self, decl: str) -> None:
        self._end_text()

    def handle_pi(self, data: str) -> None:
        self._end_text()

    def unknown_decl(self, data: str) -> None:
        self._end_text()
