"""One positive and one near-miss per credential rule, the shapes a review found
stored raw, and the pathological inputs every pattern must get through."""

from __future__ import annotations

import logging
import sys

import pytest

from memories.models import Memory
from teams.scrubber import CREDENTIAL_RULES, CredentialScrubbingFilter, scrub
from tests.conftest import Agent, operator_view
from tests.linear_time import assert_linear_time

HEX64 = "0123456789abcdef" * 4

# kind: (text holding a credential, the secret part, a near miss that must stay as is)
RULE_EXAMPLES: dict[str, tuple[str, str, str]] = {
    "private_key": (
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----",
        "MHcCAQEEIBkg",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZI\n-----END PUBLIC KEY-----",
    ),
    "memoryhub_token": ("token mh_" + "x" * 40, "x" * 40, "mh_short_name"),
    "anthropic_key": ("sk-ant-api03-" + "a" * 30, "a" * 30, "sk-ant-short"),
    "openai_key": ("sk-proj-" + "b" * 30, "b" * 30, "skip sk-learn models"),
    "aws_access_key": ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLEX2 is too long"),
    "github_token": ("ghp_" + "A" * 36, "A" * 36, "ghp_" + "A" * 20),
    "gitlab_token": ("glpat-" + "c" * 20, "c" * 20, "glpat-short"),
    "slack_token": ("xoxe-1-" + "d" * 20, "d" * 20, "xoxe-short"),
    "slack_webhook": (
        "https://hooks.slack.com/services/T000/B000/" + "e" * 24,
        "e" * 24,
        "https://hooks.slack.com/help",
    ),
    "google_api_key": ("AIza" + "f" * 35, "f" * 35, "AIza" + "f" * 10),
    "google_oauth_secret": ("GOCSPX-" + "g" * 28, "g" * 28, "GOCSPX-short"),
    "stripe_key": ("sk_live_" + "h" * 24, "h" * 24, "sk_live_short"),
    "stripe_webhook_secret": ("whsec_" + "i" * 32, "i" * 32, "whsec_short"),
    "huggingface_token": ("hf_" + "j" * 34, "j" * 34, "hf_transfer is a package"),
    "npm_token": ("npm_" + "k" * 36, "k" * 36, "npm_config_registry"),
    "pypi_token": ("pypi-AgEIcHlwaS5vcmc" + "l" * 60, "l" * 60, "pypi-packaging notes"),
    "sendgrid_key": ("SG." + "m" * 22 + "." + "n" * 43, "n" * 43, "SG.example is a domain"),
    "vault_token": ("hvs." + "o" * 30, "o" * 30, "hvs.short"),
    "digitalocean_token": ("dop_v1_" + HEX64, HEX64, "dop_v1_nothex"),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiJ9 alone is a header",
    ),
    "azure_storage_key": (
        "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + "p" * 86 + "==;",
        "p" * 86,
        "AccountName=x;EndpointSuffix=core.windows.net",
    ),
    "basic_auth": (
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "dXNlcjpwYXNzd29yZA==",
        "a basic understanding",
    ),
    "bearer_token": (
        "Authorization: Bearer abc.def-ghi_jkl/mno+pqr",
        "abc.def-ghi_jkl/mno+pqr",
        "the bearer of bad news",
    ),
    "url_password": (
        "postgres://app:hunter2pass@db:5432/x",
        "hunter2pass",
        "https://example.com:8080/x?to=a@b.com",
    ),
    "password_assignment": (
        "DB_PASSWORD=Tr0ub4dor&3",
        "Tr0ub4dor&3",
        "The password policy requires rotation.",
    ),
    "command_line_password": ("mysql -u root -pS3cretPw db", "S3cretPw", "ssh -p2222 deploy@host"),
    "aws_secret_key": (
        "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "checksum wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY of the tarball",
    ),
    "password_in_prose": (
        "the staging database password is hunter2hunter2",
        "hunter2hunter2",
        "the password is stored in Vault",
    ),
    "token_in_prose": (
        "the API token for staging is 9f8e7d6c5b4a3f2e1d0c",
        "9f8e7d6c5b4a3f2e1d0c",
        "the token budget is 2000 tokens",
    ),
    "command_line_option": (
        "psql --password Hunter2Hunter2x app",
        "Hunter2Hunter2x",
        "psql --password -h db.internal app",
    ),
    "command_line_user_password": (
        "http -a admin:Hunter2Hunter2 POST https://api.internal/",
        "Hunter2Hunter2",
        "http -a $API_USER:$API_PASSWORD POST https://api.internal/",
    ),
}
# What a positive example also redacts, besides its own kind (the key id next to a key).
ALSO_REDACTED: dict[str, dict[str, int]] = {"aws_secret_key": {"aws_access_key": 1}}


def test_every_rule_has_examples() -> None:
    assert set(RULE_EXAMPLES) == {rule.kind for rule in CREDENTIAL_RULES}


@pytest.mark.parametrize("kind", sorted(RULE_EXAMPLES))
def test_rule_redacts_its_positive_example(kind: str) -> None:
    text, secret, _ = RULE_EXAMPLES[kind]

    result = scrub(f"before {text} after")

    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert result.text.startswith("before ") and result.text.endswith(" after")
    assert result.redactions == {kind: 1, **ALSO_REDACTED.get(kind, {})}


@pytest.mark.parametrize("kind", sorted(RULE_EXAMPLES))
def test_rule_leaves_its_near_miss_alone(kind: str) -> None:
    _, _, near_miss = RULE_EXAMPLES[kind]

    result = scrub(near_miss)

    assert result.text == near_miss and not result.redactions


# Each of these was stored raw.
@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("DB_PASSWORD=hunter2hunter2", "hunter2hunter2"),
        ("POSTGRES_PASSWORD: hunter2hunter2", "hunter2hunter2"),
        ("SECRET_KEY=django-insecure-abc123", "django-insecure-abc123"),
        ("client_secret=abcdef123456", "abcdef123456"),
        ('{"password": "hunter2hunter2"}', "hunter2hunter2"),
        ('{"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}', "wJalrXUtnFEMI"),
        ('"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "wJalrXUtnFEMI"),
        ("password=ab,cd;ef/gh", "ab,cd;ef/gh"),
        ("redis://:s3cretpw@cache:6379/0", "s3cretpw"),
        ("postgres://u:p@ss@h/db", "p@ss"),
        ("xapp-1-A0123-" + "q" * 20, "q" * 20),
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0x\n-----END PGP PRIVATE KEY BLOCK-----",
            "lQOYBF0x",
        ),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nQUJDREVG\n\nthe rest", "QUJDREVG"),
        (
            '{"key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN\\n-----END PRIVATE KEY-----\\n"}',
            "MIIEvQIBADAN",
        ),
        (
            "  tls: |\n    -----BEGIN EC PRIVATE KEY-----\n    MHcCAQEEIBkg\n    -----END EC PRIVATE KEY-----",
            "MHcCAQEEIBkg",
        ),
    ],
)
def test_shapes_that_were_stored_raw_are_redacted(text: str, secret: str) -> None:
    result = scrub(text)

    assert secret not in result.text
    assert result.redactions


# The security review's shapes, each stored raw before gitleaks' rule set and the
# assignment, prose and command-line forms.
@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("API_TOKEN=Zt8yQ2mW4kR7pL1vX9cB3nF6", "Zt8yQ2mW4kR7pL1vX9cB3nF6"),
        ("GITHUB_TOKEN=" + "3f9a2c1b" * 5, "3f9a2c1b" * 5),
        ("PRIVATE_TOKEN=Xq4vN8rT2mK6pL0s", "Xq4vN8rT2mK6pL0s"),
        ("curl -u admin:Hunter2Hunter2 https://ci.internal/", "Hunter2Hunter2"),
        ("psql --password Hunter2Hunter2x", "Hunter2Hunter2x"),
        ("aws AKIAIOSFODNN7EXAMPLE\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
        ("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
        ("Twilio key SK" + "0f1e2d3c4b5a6978" * 2, "0f1e2d3c4b5a6978"),
        ("PASSWORD=abc12", "abc12"),
        ('{"password": "abc"}', '"abc"'),
        ('{"type": "service_account", "private_key_id": "' + "a1b2c3d4e5" * 4 + '"}', "a1b2c3d4e5"),
        ("the staging database password is hunter2hunter2", "hunter2hunter2"),
        ("pw: Hunter2Hunter2", "Hunter2Hunter2"),
        ("sshpass -p Hunter2Hunter2 ssh deploy@10.0.0.7", "Hunter2Hunter2"),
        ("redis-cli -h cache -a Hunter2Hunter2 PING", "Hunter2Hunter2"),
        ("docker login -u ci -p Hunter2Hunter2 registry.internal", "Hunter2Hunter2"),
        ("vercel deploy --token=Zt8yQ2mW4kR7pL1vX9cB3nF6", "Zt8yQ2mW4kR7pL1vX9cB3nF6"),
    ],
)
def test_the_shapes_the_review_found_stored_raw_are_redacted(text: str, secret: str) -> None:
    result = scrub(text)

    assert secret not in result.text, result.text
    assert result.redactions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgres://u:p@ss@h/db", "postgres://u:[REDACTED:url_password]@h/db"),
        ("redis://:pw1234@cache:6379", "redis://:[REDACTED:url_password]@cache:6379"),
        (
            "see https://u:pw1234@example.com/a?to=x@y.z",
            "see https://u:[REDACTED:url_password]@example.com/a?to=x@y.z",
        ),
    ],
)
def test_a_url_password_is_redacted_up_to_its_host(text: str, expected: str) -> None:
    assert scrub(text).text == expected


def test_a_pem_block_without_end_line_keeps_the_prose_after_it() -> None:
    result = scrub("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n\nRotate it next week.")

    assert result.text == "[REDACTED:private_key]\nRotate it next week."


def test_a_value_a_specific_rule_took_is_not_counted_twice() -> None:
    result = scrub("OPENAI_API_KEY=sk-proj-" + "b" * 30)

    assert result.text == "OPENAI_API_KEY=[REDACTED:openai_key]"
    assert result.redactions == {"openai_key": 1}


def test_log_tracebacks_are_scrubbed() -> None:
    key = "sk-proj-" + "z" * 30
    try:
        raise ValueError(f"provider refused {key}")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "call failed", None, exc_info=True)
        record.exc_info = sys.exc_info()

    CredentialScrubbingFilter().filter(record)
    printed = logging.Formatter().format(record)

    assert "provider refused [REDACTED:openai_key]" in printed
    assert key not in printed


SIZE = 64 * 1024
# Each shape: a prefix, then a fragment repeated up to the size.
PATHOLOGICAL_SHAPES = {
    "a.": ("", "a."),
    "a@": ("", "a@"),
    "://": ("", "://"),
    "a:": ("", "a:"),
    "base64": ("", "QUJD"),
    "base64 lines": ("", "QUJD" * 16 + "\n"),
    "eyJ-": ("", "eyJ-"),
    "eyJ.": ("", "eyJaaaaaaaaa."),
    "sk-": ("", "sk-"),
    "password=": ("", "password="),
    "scheme://u:": ("x://u:", "b"),
    "url @": ("x://u:", "p@"),
    "BEGIN": ("", "-----BEGIN RSA PRIVATE KEY-----\n"),
    "mysql": ("", "mysql "),
    "bearer": ("", "bearer "),
    "unicode": ("", "é."),
}


def _pathological(shape: str, size: int) -> str:
    prefix, fragment = PATHOLOGICAL_SHAPES[shape]
    return prefix + fragment * (size // len(fragment))


@pytest.mark.parametrize("shape", sorted(PATHOLOGICAL_SHAPES))
def test_pathological_inputs_are_scrubbed_in_linear_time(shape: str) -> None:
    assert isinstance(scrub(_pathological(shape, SIZE)).text, str)
    # Quadratic backtracking took 12.8 s on 64 KiB here.
    assert_linear_time(scrub, lambda size: _pathological(shape, size), SIZE)


@pytest.mark.parametrize(
    "key", ["AKIAIOSFODNN7EXAMPLE", "sk-proj-" + "b" * 30, "password:hunter2hunter2", "glpat-" + "c" * 20]
)
def test_a_memory_key_shaped_like_a_credential_is_refused(member: Agent, key: str) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": key, "content": "some text"}, format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid" and "credential" in body["fields"]["key"][0]
    assert key.encode() not in response.content
    with operator_view():
        assert not Memory.objects.exists()


def test_an_ordinary_key_that_mentions_a_password_is_saved(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": "db-password-rotation", "content": "rotate monthly"}, format="json"
    )

    assert response.status_code == 201, response.content
    assert (response.json()["key"], response.json()["content"]) == ("db-password-rotation", "rotate monthly")
    with operator_view():
        saved = Memory.objects.get(team=member.team)
    assert (saved.key, saved.content, saved.is_active) == ("db-password-rotation", "rotate monthly", True)
    read = member.client.get(member.url("memories/db-password-rotation/"))
    assert read.status_code == 200 and read.json()["content"] == "rotate monthly"
