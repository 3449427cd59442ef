"""dashboard.page_redaction on pages written by hand: text and user-content attribute
values lose the secret; markup, scripts and the CSRF input never change."""

from __future__ import annotations

import pytest

from dashboard.page_redaction import redact_page
from teams.scrubber import SecretMatcher

MARKER = "[REDACTED:vault_secret]"


def redacted(page: str, *secrets: str) -> str:
    return redact_page(page, SecretMatcher(secrets))[0]


def test_text_and_a_user_content_attribute_lose_the_secret() -> None:
    page = '<p title="see s3cret-value-1">the key is s3cret-value-1.</p><a href="/m/s3cret-value-1/">x</a>'

    assert redacted(page, "s3cret-value-1") == (
        f'<p title="see {MARKER}">the key is {MARKER}.</p><a href="/m/{MARKER}/">x</a>'
    )


def test_markup_names_and_other_attributes_are_never_touched() -> None:
    page = (
        '<body hx-headers=\'{"X-CSRFToken": "abc"}\'>'
        '<form method="post" action="/teams/alpha/vault/s1/delete/">'
        '<input type="hidden" name="csrfmiddlewaretoken" value="tok-csrfmiddlewaretoken">'
        '<button class="hx-headers">Remove</button></form></body>'
    )

    for secret in ('name="csrfmiddlewaretoken"', "hx-headers", "csrfmiddlewaretoken", "X-CSRFToken"):
        assert redacted(page, secret) == page, secret


def test_the_csrf_input_value_is_kept_even_when_it_holds_a_secret() -> None:
    page = '<input type="hidden" name="csrfmiddlewaretoken" value="AAAAsecret-part-1BBBB">'

    assert redacted(page, "secret-part-1") == page


def test_scripts_and_styles_are_the_templates_own() -> None:
    page = '<script>const x = "secret-in-js";</script><style>.secret-in-js{}</style><p>secret-in-js</p>'

    assert redacted(page, "secret-in-js") == (
        f'<script>const x = "secret-in-js";</script><style>.secret-in-js{{}}</style><p>{MARKER}</p>'
    )


@pytest.mark.parametrize("secret", ["a&b<c>d-9", "it's-a-secret"])
def test_a_secret_written_with_entities_is_found_and_the_text_stays_escaped(secret: str) -> None:
    import html

    page = f"<textarea name='content'>note: {html.escape(secret)} end</textarea>"

    out = redacted(page, secret)

    assert out == f"<textarea name='content'>note: {MARKER} end</textarea>"


def test_a_rewritten_tag_keeps_its_other_attributes_and_self_closing_form() -> None:
    page = '<input type="search" name="q" value="find s3cret-value-1" autofocus/>'

    assert (
        redacted(page, "s3cret-value-1") == f'<input type="search" name="q" value="find {MARKER}" autofocus/>'
    )


def test_a_page_without_any_secret_is_returned_as_it_is() -> None:
    page = "<p>nothing here &amp; no secret</p>"

    assert redact_page(page, SecretMatcher(["s3cret-value-1"])) == (page, 0)
