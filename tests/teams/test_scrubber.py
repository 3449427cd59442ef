from __future__ import annotations

import pytest

from teams.scrubber import scrub

PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "kind", "secret_part"),
    [
        ("key AKIAIOSFODNN7EXAMPLE here", "aws_access_key", "AKIAIOSFODNN7EXAMPLE"),
        ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx", "openai_key", "abcdefghijklmnopqrstuvwx"),
        ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "anthropic_key", "abcdefghijklmnopqrstuvwxyz"),
        ("token ghp_" + "A" * 36, "github_token", "A" * 36),
        ("xoxb-1234567890-abcdefghij", "slack_token", "1234567890-abcdefghij"),
        ("Authorization: Bearer abc.def-ghi_jkl/mno+pqr", "bearer_token", "abc.def-ghi_jkl/mno+pqr"),
        ("postgres://app:hunter2pass@db:5432/x", "url_password", "hunter2pass"),
        (PRIVATE_KEY, "private_key", "MIIEpAIBAAKCAQEA7"),
        ("password = 'Tr0ub4dor&3'", "password_assignment", "Tr0ub4dor&3"),
        ("mh_" + "x" * 40, "memoryhub_token", "x" * 40),
    ],
)
def test_credential_shapes_are_redacted(text: str, kind: str, secret_part: str) -> None:
    result = scrub(text)

    assert secret_part not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert result.redactions[kind] == 1


def test_context_around_a_credential_is_kept() -> None:
    result = scrub("connect to postgres://app:hunter2pass@db:5432/x now")

    assert result.text == "connect to postgres://app:[REDACTED:url_password]@db:5432/x now"


def test_vault_secrets_are_redacted_longest_first() -> None:
    result = scrub("a=abcdef123 b=abcdef123456", ["abcdef123", "abcdef123456"])

    assert result.text == "a=[REDACTED:vault_secret] b=[REDACTED:vault_secret]"
    assert result.redactions["vault_secret"] == 2


def test_short_secrets_are_not_used_to_redact_ordinary_words() -> None:
    assert scrub("set it to true", ["true"]).text == "set it to true"


@pytest.mark.parametrize(
    "text",
    [
        "Never deploy on Fridays.",
        "The password policy requires rotation.",
        "See https://example.com/docs for details",
        "user@example.com wrote the decision",
        "skip-the-tests is a bad idea",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    result = scrub(text)
    assert result.text == text and not result.redactions


def _finditer_spans(regex: object, data: bytes) -> list[list[tuple[int, int]]]:
    groups = regex.groups  # type: ignore[attr-defined]
    return [[m.span(g) for g in range(groups + 1)] for m in regex.finditer(data)]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        "postgres://admin:hunter2hunter2@db.internal:5432/app and x://u:p@" * 40,
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n" * 20,
        "password=correct-horse-battery token: ghp_Q9x2LmN4pR7sT1vW3yZ5aB8cD0eF6gH2jK4m " * 30,
        "nothing to see here, just prose about deploys on Tuesday. " * 50,
        # Prefixes inside words, which the pattern's opening \\b refuses: retried one byte on,
        # and, past the re-read budget, finished by the pattern as written.
        "xsk-" * 5000 + " sk-proj-" + "a" * 30,
        "xghp_" + "A" * 40 + " ghp_" + "B" * 40 + " _pul-" + "0" * 40 + " pul-" + "1" * 40,
        "",
    ],
)
def test_the_fast_match_loop_finds_what_finditer_finds_with_the_rule_as_written(text: str) -> None:
    from teams import scrubber
    from teams.credential_catalogue import catalogue

    data = text.encode()
    rules = [*scrubber._COMPILED_RULES, *catalogue().rules]
    for rule in rules:
        fast = [
            [tuple(s) for s in spans] for spans in scrubber._word_start_spans(rule.regex, rule.exact, data)
        ]
        expected = _finditer_spans(rule.exact or rule.regex, data)
        assert fast == expected, rule.kind


class CountingPattern:
    """A compiled pattern whose searches are counted."""

    def __init__(self, regex: object) -> None:
        self.groups = regex.groups  # type: ignore[attr-defined]
        self.searches = 0
        compiled = regex._regexp  # type: ignore[attr-defined]

        outer = self

        class Compiled:
            def Match(self, *args: object) -> object:  # the wrapper's own name
                outer.searches += 1
                return compiled.Match(*args)

        self._regexp = Compiled()


def test_the_word_start_retries_stay_linear() -> None:
    from teams import scrubber

    (openai,) = [rule for rule in scrubber._COMPILED_RULES if rule.kind == "openai_key"]
    fast = CountingPattern(openai.regex)
    data = ("xsk-" + "a" * 60) * 1000

    spans = list(scrubber._word_start_spans(fast, openai.exact, data.encode()))

    # Every "sk-" is inside a word, and each refused match runs to the end of the text:
    # a few retries spend the re-read budget, then the pattern as written finishes it,
    # instead of a thousand searches each reading the rest of the text.
    assert spans == []
    assert fast.searches <= 2 * scrubber._REREAD_LIMIT + 1


def _every_keyword_text() -> str:
    from teams import scrubber

    return " ".join(k.decode() for rule in scrubber._COMPILED_RULES for k in rule.keywords)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nothing to see here, only words about a deploy on Friday",
        "OPENAI_API_KEY=sk-ant-api03-x and SK-PROJ- in capitals",
        "Bearer xoxb- ghp_ mh_ -----BEGIN PRIVATE KEY-----",
        "caf\u00e9 \u212a\u00e9lvin \ud800 lone surrogate, then sk-",
        "sk-ant",  # a keyword's prefix only
        "key" * 1000,
    ],
)
def test_the_keyword_prefilter_picks_the_rules_each_keyword_test_would(text: str) -> None:
    """One pass of the keyword set chooses exactly the rules that testing each rule's
    keywords in the lowered bytes chooses, in the rules' order."""
    from teams import scrubber

    for candidate in (text, _every_keyword_text(), text + _every_keyword_text().upper()):
        lowered = candidate.encode("utf-8", "surrogatepass").lower()
        for rules, prefilter in (
            (scrubber._SHAPE_RULES, scrubber._SHAPE_PREFILTER),
            (scrubber._CONTEXT_RULES, scrubber._CONTEXT_PREFILTER),
        ):
            expected = [r for r in rules if not r.keywords or any(k in lowered for k in r.keywords)]
            assert prefilter.rules_for(lowered) == expected
