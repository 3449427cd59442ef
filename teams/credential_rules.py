"""The scrubber's own rules: shapes it names itself, and the context forms a rule set
for source files does not cover (assignments in any config syntax, prose, command
lines). Data: a kind, an RE2 pattern, and for the context forms a check of the value
(placeholders, variable references and code are not secrets).

RE2 has no lookaround: a rule that needs the text around a secret captures it, and only
its group named `s` (or `s2`, `s3`, `s4`: one per alternative) is redacted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from detect_secrets.plugins.keyword import DENYLIST as DETECT_SECRETS_KEYWORDS

# A value check: (the whole text, the secret's span, whether the value was quoted) -> keep?
ValueCheck = Callable[[bytes, tuple[int, int], bool], bool]


@dataclass(frozen=True)
class CredentialRule:
    kind: str
    pattern: str  # RE2 syntax; groups named s, s2, s3, s4 hold the secret (else the whole match)
    check: ValueCheck | None = None
    quoted_groups: tuple[str, ...] = ()  # secret groups whose value was written in quotes
    # Lowercase literals one of which every match holds: the rule runs only on a text
    # holding one (as gitleaks' keywords do), so most texts skip most rules.
    keywords: tuple[bytes, ...] = ()


# --------------------------------------------------------------------------- value checks

# Values that stand for a secret without being one.
PLACEHOLDERS = frozenset(
    """
    none null nil true false undefined empty blank required optional hidden masked redacted
    str string bytes int integer bool boolean secret password passwd pass token changeme
    change-me changeit example placeholder dummy test testing todo tbd xxx xxxx xxxxx
    your-password yourpassword your_password mypassword my-password your-token your-api-key
    your_api_key api-key apikey api_key n/a na unset default prompt stdin env
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
_REFERENCE_FIRST_BYTES = frozenset(b"$%{<!@")
_MASK_BYTES = b"*xX.-_#\xe2\x80\xa2"
_PLACEHOLDER_BYTES = frozenset(word.encode() for word in PLACEHOLDERS)


def _is_placeholder(value: bytes) -> bool:
    """A stand-in (`changeme`, `<your-token>`, `********`) or a reference to where the
    secret really is (`$DB_PASSWORD`, `${{ secrets.X }}`, `%PASS%`, `!vault`)."""
    value = value.strip(b" ,;")
    if not value or value[0] in _REFERENCE_FIRST_BYTES or value.startswith(b"#{"):
        return True
    return value.lower() in _PLACEHOLDER_BYTES or not value.strip(_MASK_BYTES)


def _looks_like_code(value: bytes) -> bool:
    """A bare value that is a call, a subscript, an attribute path or an identifier
    naming a variable (`getpass()`, `os.environ[...]`, `self.password`, `db_password`,
    `newPassword`): code that handles a secret, not the secret."""
    value = value.rstrip(b",;")
    if b"(" in value or b"[" in value or b")" in value or b"]" in value:
        return True
    if not value.translate(None, b"_.").isalpha():  # digits or symbols: not an identifier
        return False
    if b"." in value or b"_" in value.strip(b"_"):
        return True
    camel = not value.islower() and not value.isupper() and not value.istitle()
    return camel or len(value) < 6


def _has_secret_texture(value: bytes) -> bool:
    """Digits, a symbol, or capitals past the first letter: not a plain word."""
    if not value.isalpha():
        return True
    return not (value.islower() or value.isupper() or value.istitle())


def assigned_value(data: bytes, span: tuple[int, int], quoted: bool) -> bool:
    """`KEY=value`, `key: value`, `"key": "value"`: any value but a placeholder, a
    reference or (unquoted) code; short ones only in quotes (`{"password": "abc"}`)."""
    value = data[span[0] : span[1]]
    if _is_placeholder(value):
        return False
    if quoted:
        return len(value) >= 3
    if (value.isdigit() and len(value) < 6) or value.startswith((b"/", b"./", b"~/")):  # a number, a path
        return False
    return len(value) >= 4 and not _looks_like_code(value)


def prose_password(data: bytes, span: tuple[int, int], quoted: bool) -> bool:
    """`the staging password is hunter2hunter2`: a value with a secret's texture (or
    quoted), so `the password is required` and `… is stored in Vault` stay."""
    value = data[span[0] : span[1]]
    if _is_placeholder(value) or len(value) < 4:
        return False
    return quoted or _has_secret_texture(value)


def prose_token(data: bytes, span: tuple[int, int], quoted: bool) -> bool:
    """`the API token is …`: long, letters and digits (`the token budget is 2000` stays)."""
    value = data[span[0] : span[1]]
    if len(value) < 16 or value.isalpha() or value.isdigit():
        return False
    return not _is_placeholder(value)


def command_value(data: bytes, span: tuple[int, int], quoted: bool) -> bool:
    value = data[span[0] : span[1]]
    return len(value) >= 3 and not _is_placeholder(value)


def random_key(data: bytes, span: tuple[int, int], quoted: bool) -> bool:
    """A 40-character AWS secret key: random, so it mixes letters and digits."""
    value = data[span[0] : span[1]]
    without_digits = value.translate(None, b"0123456789")
    return len(without_digits) < len(value) and len(without_digits.translate(None, b"+/")) >= 10


# --------------------------------------------------------------------------- patterns

# The keys of an assignment that names a secret: detect-secrets' keyword detector list
# (api_?key, db_?pass, contraseña, …) with `_?` widened to `_`, `-` or `.`, and ours.
_DETECT_SECRETS_WORDS = tuple(word.replace("_?", "[_.-]?") for word in DETECT_SECRETS_KEYWORDS)
_NAMING_WORDS = "|".join(
    sorted(
        {
            *_DETECT_SECRETS_WORDS,
            "passphrase",
            "passcode",
            "api[_.-]?token",
            "access[_.-]?token",
            "auth[_.-]?token",
            "refresh[_.-]?token",
            "private[_.-]?token",
            "private[_.-]?key[_.-]?id",
            "client[_.-]?secret",
            "secret[_.-]?access[_.-]?key",
            "secret[_.-]?key",
            "credentials?",
            "token",
        },
        key=len,
        reverse=True,
    )
)
# Short words only as a whole segment of the key (`db_pass`, `pw`, not `bypass`).
_SHORT_WORDS = "pw|pass"
# The match starts at the naming word: what precedes it in the key (`DB_`, `aws_`)
# changes nothing, and a run before it would make RE2 carry a counter through every byte.
_ASSIGNED_KEY = (
    r"(?i)(?:(?:" + _NAMING_WORDS + r")|(?:\b|[_.-])(?:" + _SHORT_WORDS + r"))"
    r"(?:[_.-]?(?:key|value|token))?[\"'\]]{0,2}[ \t]*(?:=|:=|:|=>|->)[ \t]*"
)
# A quoted value may hold anything but its quote; a bare one runs to whitespace or a
# quote, so `,` `;` `/` inside a password are redacted with it.
_ASSIGNED_VALUE = (
    r"(?:\"(?P<s>[^\"\n]+)\"|'(?P<s2>[^'\n]+)'|\x60(?P<s4>[^\x60\n]+)\x60|(?P<s3>[^\s\"'\x60<>]+))"
)
# What follows a secret word in prose before the verb: "for the staging db", "of root".
_PROSE_QUALIFIER = r"(?:\s+(?:for|of|on|to|at|in)\s+[\w.@:/-]{1,40}(?:\s+[\w.@:/-]{1,40}){0,3}?)?"
_PROSE_VERB = (
    r"\s+(?:is|was|are|were|remains|will\s+be|has\s+been|is\s+now|was\s+changed\s+to|is\s+set\s+to)\s+"
)
_PROSE_VALUE = r"(?:[\"'\x60](?P<s>[^\"'\x60\n]+)[\"'\x60]|(?P<s2>[^\s\"'\x60<>]*[^\s\"'\x60<>.,;:!?)\]]))"
_OPTION_VALUE = r"(?:\"(?P<s>[^\"\n]+)\"|'(?P<s2>[^'\n]+)'|(?P<s3>[^\s\"'-][^\s\"']*))"
_COMMAND_TAIL = r"[^\n|;&]{0,200}?"
_AWS_KEY_ID_KEYWORDS = (b"akia", b"asia", b"abia", b"acca")
_AWS_PAIR_KEYWORDS = (*_AWS_KEY_ID_KEYWORDS, b"[redacted:aws_access_key]")
# Every naming word holds one of these (detect-secrets' list included: api_?key, db_?pass, …).
_ASSIGNMENT_KEYWORDS = (b"pass", b"pw", b"secret", b"token", b"key", b"credential", b"contrase")
_AWS_KEY_ID = r"(?:\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b|\[REDACTED:aws_access_key\])"

# Shapes that name their provider; run before gitleaks' rule set, so these keep the
# kinds the project has always reported.
SHAPE_RULES: tuple[CredentialRule, ...] = (
    # A PEM or PGP private key block: its header and base64 lines, then the END line if
    # there is one. Line by line, not "anything up to END": RE2 is linear per search,
    # but a body that may run to the end of the text would make every BEGIN scan it.
    # The second form is a key pasted with escaped newlines (JSON, .env).
    CredentialRule(
        "private_key",
        r"-----BEGIN[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:\r?\n[ \t]*(?m:[A-Za-z-]+: [^\n]*|[A-Za-z0-9+/=]*\r?$))+"
        r"|(?:(?:\\r)?\\n(?:[A-Za-z-]+: [^\\\n]*|[A-Za-z0-9+/=]+))+)?"
        r"(?:(?:\r?\n[ \t]*|(?:\\r)?\\n)-----END[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----)?",
        keywords=(b"private key",),
    ),
    CredentialRule("memoryhub_token", r"\bmh_[A-Za-z0-9_-]{20,}", keywords=(b"mh_",)),
    CredentialRule("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", keywords=(b"sk-ant-",)),
    CredentialRule("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", keywords=(b"sk-",)),
    # An AWS secret key written next to its key id, before or after it, with no key
    # name of its own (`AKIA… wJalr…`): 40 characters of base64 within two lines.
    CredentialRule(
        "aws_secret_key",
        r"(?:" + _AWS_KEY_ID + r"[^\n]{0,80}(?:\n[^\n]{0,80}){0,2}?[^A-Za-z0-9/+=])"
        r"(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)",
        check=random_key,
        keywords=_AWS_PAIR_KEYWORDS,
    ),
    CredentialRule(
        "aws_secret_key",
        r"(?:^|[^A-Za-z0-9/+=])(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=][^\n]{0,80}(?:\n[^\n]{0,80}){0,2}?"
        + _AWS_KEY_ID
        + r")",
        check=random_key,
        keywords=_AWS_PAIR_KEYWORDS,
    ),
    CredentialRule(
        "aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", keywords=_AWS_KEY_ID_KEYWORDS
    ),
    CredentialRule(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        keywords=(b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_"),
    ),
    CredentialRule(
        "gitlab_token",
        r"\bgl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,}",
        keywords=(b"glpat-", b"gldt-", b"glptt-", b"glrt-"),
    ),
    CredentialRule("slack_token", r"\b(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,}", keywords=(b"xox", b"xapp-")),
    CredentialRule(
        "slack_webhook",
        r"(?:https://hooks\.slack\.com/)(?P<s>(?:services|workflows|triggers)/[A-Za-z0-9/_+-]{16,})",
        keywords=(b"hooks.slack.com/",),
    ),
    CredentialRule("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", keywords=(b"aiza",)),
    CredentialRule("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_-]{20,}", keywords=(b"gocspx-",)),
    CredentialRule(
        "stripe_key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}", keywords=(b"_live_", b"_test_")
    ),
    CredentialRule("stripe_webhook_secret", r"\bwhsec_[A-Za-z0-9+/=]{20,}", keywords=(b"whsec_",)),
    CredentialRule("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}", keywords=(b"hf_",)),
    CredentialRule("npm_token", r"\bnpm_[A-Za-z0-9]{30,}", keywords=(b"npm_",)),
    CredentialRule("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", keywords=(b"pypi-age",)),
    CredentialRule("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{30,}", keywords=(b"sg.",)),
    CredentialRule("vault_token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}", keywords=(b"hvs.", b"hvb.", b"hvr.")),
    CredentialRule("digitalocean_token", r"\bdo[por]_v1_[a-f0-9]{64}\b", keywords=(b"_v1_",)),
    CredentialRule(
        "jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", keywords=(b"eyj",)
    ),
    CredentialRule(
        "azure_storage_key",
        r"(?i)(?:\b(?:AccountKey|SharedAccessKey)\s*=\s*)(?P<s>[A-Za-z0-9+/]{20,}={0,2})",
        keywords=(b"accountkey", b"sharedaccesskey"),
    ),
)

# Forms around a secret of any shape; run after gitleaks' provider rules (and before its
# generic rule), each over the text the rules before it left.
CONTEXT_RULES: tuple[CredentialRule, ...] = (
    CredentialRule(
        "basic_auth",
        r"(?i)(?:\bauthorization[\"']?\s*[:=]\s*[\"']?basic\s+)(?P<s>[A-Za-z0-9+/]{8,}={0,2})",
        keywords=(b"basic",),
    ),
    CredentialRule(
        "bearer_token", r"(?i)(?:\bbearer\s+)(?P<s>[A-Za-z0-9._~+/=-]{16,})", keywords=(b"bearer",)
    ),
    # scheme://user:password@host; the password may hold `@` (the last `@` before the
    # host ends it) but not `/ ? #`, so a port or a path is never taken for one.
    CredentialRule(
        "url_password",
        r"(?i)(?:\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<s>[^\s/?#]+?)(?:@[a-z0-9.\[\]_%-]+(?:[:/?#\s\"'<>),;]|$))",
        keywords=(b"://",),
    ),
    CredentialRule(
        "password_assignment",
        _ASSIGNED_KEY + _ASSIGNED_VALUE,
        check=assigned_value,
        quoted_groups=("s", "s2", "s4"),
        keywords=_ASSIGNMENT_KEYWORDS,
    ),
    CredentialRule(
        "password_in_prose",
        r"(?i)(?:\b(?:pass(?:word|phrase|code)|passwd|pwd|pw)s?\b"
        + _PROSE_QUALIFIER
        + _PROSE_VERB
        + r")"
        + _PROSE_VALUE,
        check=prose_password,
        quoted_groups=("s",),
        keywords=(b"pass", b"pw"),
    ),
    CredentialRule(
        "token_in_prose",
        r"(?i)(?:\b(?:api[ _-]?(?:key|token)|access[ _-]?(?:key|token)|auth[ _-]?token|secret(?:[ _-]?key)?"
        r"|client[ _-]?secret|token)s?\b" + _PROSE_QUALIFIER + _PROSE_VERB + r")" + _PROSE_VALUE,
        check=prose_token,
        quoted_groups=("s",),
        keywords=(b"key", b"token", b"secret"),
    ),
    # mysql -pPASSWORD (mysql's -p takes its value glued on; ssh/docker -p is a port).
    CredentialRule(
        "command_line_password",
        r"(?i)(?:\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mariadb)\b[^\n|;&]*?\s-p)(?P<s>[^\s\"']+)",
        keywords=(b"mysql", b"mariadb"),
    ),
    # sshpass -p, mongo -p, redis-cli -a, docker/podman/helm login -p: a separate value.
    CredentialRule(
        "command_line_password",
        r"(?i)(?:\b(?:(?:sshpass|mongo|mongosh)\b"
        + _COMMAND_TAIL
        + r"\s-p|redis-cli\b"
        + _COMMAND_TAIL
        + r"\s-a"
        r"|(?:docker|podman|buildah|skopeo|helm|oras)\b"
        + _COMMAND_TAIL
        + r"\blogin\b"
        + _COMMAND_TAIL
        + r"\s-p)\s+)"
        + _OPTION_VALUE,
        check=command_value,
        keywords=(b"sshpass", b"mongo", b"redis-cli", b"login"),
    ),
    # --password X, --token=X, …: any command's option that names a secret.
    CredentialRule(
        "command_line_option",
        r"(?i)(?:(?:^|\s)--(?:password|passwd|pass|passphrase|token|secret|api-?key|api-token|access-token"
        r"|auth-token|client-secret|secret-key|private-token)(?:=|\s+))" + _OPTION_VALUE,
        check=command_value,
        keywords=(b"--",),
    ),
    # -u user:password for HTTP clients (curl is also gitleaks' curl-auth-user).
    CredentialRule(
        "command_line_user_password",
        r"(?i)(?:\b(?:curl|wget|http|https|httpie|xh)\b"
        + _COMMAND_TAIL
        + r"\s(?:-u|--user|-a|--auth|--proxy-user)(?:=|\s+)[\"']?[^\s:\"']{1,100}:)(?P<s>[^\s\"']+)",
        check=command_value,
        keywords=(b"curl", b"wget", b"http", b"xh"),
    ),
)
