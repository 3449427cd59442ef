"""A labelled corpus for the credential scrubber: texts that hold a credential (the
secret each must lose) and ordinary texts that must come back unchanged.

Values are generated from a fixed seed in each provider's documented shape (prefix,
alphabet, length), not copied from gitleaks' rule examples, and placed in the contexts
agents write: .env lines, YAML, JSON, code, shell commands, log lines and prose. The
near misses are what a memory service sees every day and a careless scrubber eats:
commit hashes, UUIDs, digests, base64 images, code that names passwords and tokens
without holding one, URLs with ordinary query strings, and prose about credentials.

Used by tests/teams/test_scrubber_corpus.py (recall and false-positive floors) and by
`make bench` section `scrubber` (figures with intervals, misses, timing).
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

SEED = 20261128
UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Positive:
    label: str
    text: str
    secret: str  # the part that must not survive the scrub


@dataclass(frozen=True)
class Negative:
    label: str
    text: str


class _Values:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def of(self, alphabet: str, size: int) -> str:
        # At least one digit and one letter when the alphabet has both, as real keys do.
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(size))
            if not (set(alphabet) & set(DIGITS)) or not (set(alphabet) & set(LOWER + UPPER)):
                return value
            if any(c in DIGITS for c in value) and any(c.isalpha() for c in value):
                return value

    def hex(self, size: int) -> str:
        return self.of(HEX, size)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def password(self, size: int = 14) -> str:
        symbols = "!#%&*+-=?@^_~"
        value = [
            self.rng.choice(LOWER),
            self.rng.choice(UPPER),
            self.rng.choice(DIGITS),
            self.rng.choice(symbols),
        ]
        value += [self.rng.choice(ALNUM + symbols) for _ in range(size - 4)]
        self.rng.shuffle(value)
        return "".join(value)

    def word_password(self) -> str:
        words = ["hunter", "falcon", "orchid", "granite", "velvet", "summit", "copper", "maple", "harbor"]
        return self.rng.choice(words) + str(self.rng.randint(10, 9999)) + self.rng.choice(words).capitalize()

    def pick(self, options: list[str]) -> str:
        return self.rng.choice(options)


# Each maker: (label, function(values) -> (credential text, secret)). The credential text
# is then placed in a few contexts (see _contexts) unless the maker gives a whole text.
_Maker = tuple[str, Callable[[_Values], tuple[str, str]]]


def _token(prefix: str, alphabet: str, size: int, suffix: str = "") -> Callable[[_Values], tuple[str, str]]:
    def make(v: _Values) -> tuple[str, str]:
        value = prefix + v.of(alphabet, size) + suffix
        return value, value

    return make


# Tokens whose shape alone says what they are.
_SHAPED: list[_Maker] = [
    ("aws access key id", lambda v: (k := "AKIA" + v.of(UPPER + "234567", 16), k)),
    ("aws sts key id", lambda v: (k := "ASIA" + v.of(UPPER + "234567", 16), k)),
    ("github classic pat", _token("ghp_", ALNUM, 36)),
    ("github oauth token", _token("gho_", ALNUM, 36)),
    ("github app token", _token("ghs_", ALNUM, 36)),
    ("github refresh token", _token("ghr_", ALNUM, 36)),
    ("github fine-grained pat", _token("github_pat_", ALNUM + "_", 82)),
    ("gitlab pat", _token("glpat-", URLSAFE, 20)),
    ("gitlab runner token", _token("glrt-", ALNUM, 20)),
    ("slack bot token", lambda v: (t := f"xoxb-{v.of(DIGITS, 12)}-{v.of(DIGITS, 13)}-{v.of(ALNUM, 24)}", t)),
    (
        "slack user token",
        lambda v: (t := f"xoxp-{v.of(DIGITS, 12)}-{v.of(DIGITS, 12)}-{v.of(DIGITS, 12)}-{v.hex(32)}", t),
    ),
    (
        "slack app token",
        lambda v: (t := f"xapp-1-A{v.of(UPPER + DIGITS, 10)}-{v.of(DIGITS, 13)}-{v.hex(64)}", t),
    ),
    ("stripe live secret", _token("sk_live_", ALNUM, 24)),
    ("stripe test secret", _token("sk_test_", ALNUM, 24)),
    ("stripe restricted key", _token("rk_live_", ALNUM, 24)),
    ("stripe webhook secret", _token("whsec_", ALNUM, 32)),
    ("openai project key", _token("sk-proj-", URLSAFE, 48)),
    ("openai legacy key", lambda v: (t := "sk-" + v.of(ALNUM, 20) + "T3BlbkFJ" + v.of(ALNUM, 20), t)),
    ("anthropic key", _token("sk-ant-api03-", URLSAFE, 93, "AA")),
    ("google api key", _token("AIza", URLSAFE, 35)),
    ("google oauth secret", _token("GOCSPX-", URLSAFE, 28)),
    ("huggingface token", _token("hf_", ALNUM, 34)),
    ("npm token", _token("npm_", ALNUM, 36)),
    ("pypi token", _token("pypi-AgEIcHlwaS5vcmc", URLSAFE, 60)),
    ("sendgrid key", lambda v: (t := f"SG.{v.of(URLSAFE, 22)}.{v.of(URLSAFE, 43)}", t)),
    ("vault service token", _token("hvs.", URLSAFE, 95)),
    ("digitalocean pat", lambda v: (t := "dop_v1_" + v.hex(64), t)),
    ("twilio api key", lambda v: (t := "SK" + v.hex(32), t)),
    ("shopify access token", lambda v: (t := "shpat_" + v.hex(32), t)),
    ("shopify shared secret", lambda v: (t := "shpss_" + v.hex(32), t)),
    ("postman api key", lambda v: (t := f"PMAK-{v.hex(24)}-{v.hex(34)}", t)),
    ("doppler token", _token("dp.pt.", ALNUM, 43)),
    ("linear api key", _token("lin_api_", ALNUM, 40)),
    ("notion token", lambda v: (t := "ntn_" + v.of(DIGITS, 11) + v.of(ALNUM, 35), t)),
    ("databricks token", lambda v: (t := "dapi" + v.hex(32), t)),
    ("atlassian api token", _token("ATATT3", URLSAFE, 186)),
    ("age secret key", _token("AGE-SECRET-KEY-1", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    ("pulumi token", lambda v: (t := "pul-" + v.hex(40), t)),
    ("planetscale token", _token("pscale_tkn_", ALNUM, 43)),
    ("grafana service account", lambda v: (t := f"glsa_{v.of(ALNUM, 32)}_{v.hex(8)}", t)),
    ("grafana cloud token", _token("glc_", ALNUM, 80)),
    ("dynatrace token", lambda v: (t := f"dt0c01.{v.of(UPPER + DIGITS, 24)}.{v.of(UPPER + DIGITS, 64)}", t)),
    ("sentry user token", lambda v: (t := "sntryu_" + v.hex(64), t)),
    ("heroku v2 key", _token("HRKU-AA", URLSAFE, 58)),
    ("prefect key", _token("pnu_", ALNUM, 36)),
    ("readme key", _token("rdme_", LOWER + DIGITS, 70)),
    ("rubygems key", lambda v: (t := "rubygems_" + v.hex(48), t)),
    ("scalingo token", _token("tk-us-", URLSAFE, 48)),
    ("clojars token", _token("CLOJARS_", LOWER + DIGITS, 60)),
    ("frame.io token", _token("fio-u-", URLSAFE, 64)),
    ("duffel token", _token("duffel_test_", URLSAFE, 43)),
    ("easypost key", _token("EZAK", ALNUM, 54)),
    ("flutterwave secret", lambda v: (t := f"FLWSECK_TEST-{v.of('abcdefgh' + DIGITS, 32)}-X", t)),
    ("alibaba key id", _token("LTAI", ALNUM, 20)),
    ("artifactory key", _token("AKCp", ALNUM, 69)),
    ("shippo token", lambda v: (t := "shippo_live_" + v.hex(40), t)),
    ("fly.io token", _token("fo1_", URLSAFE, 43)),
    ("adobe client secret", _token("p8e-", LOWER + DIGITS, 32)),
    ("memoryhub token", _token("mh_", URLSAFE, 43)),
    ("square token", _token("EAAA", URLSAFE, 60)),
    ("intercom-style ico key", _token("ico-", ALNUM, 32)),
    ("jwt", lambda v: (t := _jwt(v), t)),
]


def _jwt(v: _Values) -> str:
    def part(raw: str) -> str:
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    header = part('{"alg":"HS256","typ":"JWT"}')
    issued = v.rng.randint(1_600_000_000, 1_800_000_000)
    claims = part(f'{{"sub":"{v.uuid()}","iat":{issued}}}')
    return f"{header}.{claims}.{v.of(URLSAFE, 43)}"


def _shaped_contexts(v: _Values, label: str, value: str) -> list[str]:
    name = label.upper().replace(" ", "_").replace("-", "_").replace(".", "_")
    return [
        f"export {name}={value}",
        f"Deploy note: the CI job now authenticates with {value} until we rotate it on Friday.",
        f'{{"service": "{label}", "credential": "{value}", "region": "eu-west-1"}}',
    ]


# Keys that name the provider, whose value alone has no telling shape.
_KEYWORD: list[tuple[str, str, Callable[[_Values], str]]] = [
    ("asana", "ASANA_CLIENT_SECRET", lambda v: v.of(LOWER + DIGITS, 32)),
    ("airtable", "AIRTABLE_API_KEY", lambda v: v.of(LOWER + DIGITS, 17)),
    ("algolia", "ALGOLIA_ADMIN_KEY", lambda v: v.of(LOWER + DIGITS, 32)),
    ("bitbucket", "BITBUCKET_CLIENT_SECRET", lambda v: v.of(LOWER + DIGITS, 64)),
    ("cloudflare", "CLOUDFLARE_API_KEY", lambda v: v.of(LOWER + DIGITS + "_-", 40)),
    ("codecov", "CODECOV_TOKEN", lambda v: v.of(LOWER + DIGITS, 32)),
    ("coinbase", "COINBASE_ACCESS_TOKEN", lambda v: v.of(LOWER + DIGITS, 64)),
    ("confluent", "CONFLUENT_SECRET", lambda v: v.of(LOWER + DIGITS, 64)),
    ("datadog", "DATADOG_APP_KEY", lambda v: v.of(LOWER + DIGITS, 40)),
    ("discord", "DISCORD_CLIENT_SECRET", lambda v: v.of(LOWER + DIGITS, 32)),
    ("dropbox", "DROPBOX_API_SECRET", lambda v: v.of(LOWER + DIGITS, 15)),
    ("heroku", "HEROKU_API_KEY", lambda v: v.uuid()),
    ("hubspot", "HUBSPOT_API_KEY", lambda v: v.uuid().upper()),
    ("launchdarkly", "LAUNCHDARKLY_ACCESS_TOKEN", lambda v: v.of(LOWER + DIGITS, 40)),
    ("mailchimp", "MAILCHIMP_API_KEY", lambda v: v.hex(32) + "-us" + str(v.rng.randint(10, 21))),
    ("mailgun", "MAILGUN_API_KEY", lambda v: "key-" + v.hex(32)),
    ("mapbox", "MAPBOX_TOKEN", lambda v: f"pk.{v.of(LOWER + DIGITS, 60)}.{v.of(LOWER + DIGITS, 22)}"),
    ("netlify", "NETLIFY_AUTH_TOKEN", lambda v: v.of(LOWER + DIGITS, 43)),
    ("new relic", "NEW_RELIC_API_KEY", lambda v: "NRAK-" + v.of(UPPER + DIGITS, 27)),
    ("okta", "OKTA_API_TOKEN", lambda v: "00" + v.of(ALNUM, 40)),
    ("plaid", "PLAID_SECRET", lambda v: v.of(LOWER + DIGITS, 30)),
    ("snyk", "SNYK_TOKEN", lambda v: v.uuid()),
    ("sumologic", "SUMO_ACCESS_KEY", lambda v: v.of(LOWER + DIGITS, 64)),
    ("telegram", "TELEGRAM_BOT_TOKEN", lambda v: f"{v.of(DIGITS, 10)}:A{v.of(ALNUM + '_-', 34)}"),
    ("travis", "TRAVIS_API_TOKEN", lambda v: v.of(LOWER + DIGITS, 22)),
    ("twitch", "TWITCH_CLIENT_SECRET", lambda v: v.of(LOWER + DIGITS, 30)),
    ("twitter", "TWITTER_API_SECRET", lambda v: v.of(ALNUM, 50)),
    ("yandex", "YANDEX_API_KEY", lambda v: "AQVN" + v.of(ALNUM + "_-", 36)),
    ("zendesk", "ZENDESK_API_TOKEN", lambda v: v.of(LOWER + DIGITS, 40)),
    ("finnhub", "FINNHUB_ACCESS_TOKEN", lambda v: v.of(LOWER + DIGITS, 20)),
    ("lob", "LOB_API_KEY", lambda v: "live_" + v.hex(35)),
    ("contentful", "CONTENTFUL_DELIVERY_TOKEN", lambda v: v.of(LOWER + DIGITS + "_-", 43)),
]


def _keyword_contexts(v: _Values, provider: str, name: str, value: str) -> list[str]:
    # Only the first names the value a secret or token; the others name the provider alone.
    return [
        f"{name}={value}",
        f"{provider} key: {value}",
        f'{{"{provider.replace(" ", "_")}": "{value}", "retries": 3}}',
    ]


def _assignments_and_prose(v: _Values) -> list[tuple[str, str, str]]:
    """(label, text, secret): the assignment, command-line and prose forms."""
    items: list[tuple[str, str, str]] = []

    def add(label: str, text: str, secret: str) -> None:
        items.append((label, text, secret))

    for _ in range(3):
        p = v.password()
        add("env PASSWORD", f"PASSWORD={p}", p)
        p = v.password(10)
        add("env DB_PASSWORD", f"DB_PASSWORD={p}", p)
        p = v.word_password()
        add("yaml password", f"database:\n  user: app\n  password: {p}\n  host: db.internal", p)
        p = v.password(12)
        add("json password", f'{{"username": "deploy", "password": "{p}"}}', p)
        t = v.of(ALNUM, 32)
        add("env API_TOKEN", f"API_TOKEN={t}", t)
        t = v.hex(40)
        add("env GITHUB_TOKEN hex", f"GITHUB_TOKEN={t}", t)
        t = v.of(URLSAFE, 20)
        add("env PRIVATE_TOKEN", f"PRIVATE_TOKEN={t}", t)
        t = v.of(ALNUM, 40)
        add("aws secret next to key id", f"AKIA{v.of(UPPER + '234567', 16)} {t}", t)
        t = v.of(B64, 40)
        add("aws secret on the next line", f"key id: AKIA{v.of(UPPER + '234567', 16)}\nsecret: {t}", t)
        t = v.of(B64, 40)
        add("aws secret assignment", f"aws_secret_access_key = {t}", t)
        p = v.password()
        add("curl -u", f"curl -u admin:{p} https://ci.internal/api/json", p)
        p = v.word_password()
        add("curl --user", f"curl --user deploy:{p} -X POST https://registry.internal/v2/", p)
        p = v.word_password()
        add("psql --password", f"psql -h db.internal -U app --password {p} app_production", p)
        p = v.password(10)
        add("mysql -p", f"mysql -h 10.0.0.5 -u root -p{p} shop", p)
        t = v.of(ALNUM, 28)
        add("--token option", f"vercel deploy --prod --token {t}", t)
        p = v.word_password()
        add("redis-cli -a", f"redis-cli -h cache.internal -a {p} FLUSHALL", p)
        p = v.word_password()
        add("sshpass", f"sshpass -p {p} ssh deploy@10.0.0.7", p)
        p = v.word_password().lower()
        add(
            "prose staging password",
            f"FYI the staging database password is {p}, rotate it after the demo.",
            p,
        )
        p = v.password(10)
        add("prose password for", f"The password for the admin account is {p}.", p)
        p = v.word_password()
        add("prose pw colon", f"grafana login -> user: admin pw: {p}", p)
        p = v.word_password()
        add("prose password was", f"Heads up: the old root password was {p} and it still works on db-02.", p)
        p = v.of(LOWER + DIGITS, 5)
        add("short PASSWORD", f"PASSWORD={p}", p)
        p = v.of(LOWER, 3)
        add("short json password", f'{{"password": "{p}"}}', p)
        t = v.hex(40)
        add("private_key_id", f'{{"type": "service_account", "private_key_id": "{t}", "client_id": "1"}}', t)
        t = v.of(ALNUM, 40)
        add("client_secret yaml", f"oauth:\n  client_id: web-app\n  client_secret: {t}", t)
        t = v.of(URLSAFE, 50)
        add("SECRET_KEY django", f"SECRET_KEY = 'django-insecure-{t}'", t)
        p = v.word_password()
        add("url password", f"DATABASE_URL=postgres://app:{p}@db.internal:5432/app", p)
        p = v.password(12).replace("@", "x").replace("/", "x").replace("?", "x").replace("#", "x")
        add("amqp url password", f"broker: amqp://worker:{p}@rabbit.internal:5672//", p)
        t = v.of(B64, 86) + "=="
        add("azure storage key", f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={t};", t)
        t = v.of(URLSAFE, 40)
        add("bearer header", f"curl -H 'Authorization: Bearer {t}' https://api.internal/v1/me", t)
        t = base64.b64encode(f"deploy:{v.password()}".encode()).decode()
        add("basic header", f"Authorization: Basic {t}", t)
        p = v.word_password()
        add("passphrase", f"gpg key passphrase: {p}", p)
        t = v.of(ALNUM, 24)
        add("docker login -p", f"docker login -u ci -p {t} registry.internal", t)
        body = v.of(B64, 64)
        add(
            "pem private key",
            f"-----BEGIN RSA PRIVATE KEY-----\nMIIEow{body}\n{v.of(B64, 64)}\n-----END RSA PRIVATE KEY-----",
            body,
        )
        body = v.of(B64, 70)
        add(
            "openssh private key",
            f"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE{body}\n-----END OPENSSH PRIVATE KEY-----",
            body,
        )
    return items


def positives() -> list[Positive]:
    v = _Values(SEED)
    items: list[Positive] = []
    for label, make in _SHAPED:
        for text in range(3):
            value, secret = make(v)
            items.append(Positive(label, _shaped_contexts(v, label, value)[text], secret))
    for provider, name, make_value in _KEYWORD:
        for text in range(3):
            value = make_value(v)
            items.append(
                Positive(f"{provider} (keyword)", _keyword_contexts(v, provider, name, value)[text], value)
            )
    items += [Positive(label, text, secret) for label, text, secret in _assignments_and_prose(v)]
    return items


def negatives() -> list[Negative]:
    v = _Values(SEED + 1)
    items: list[Negative] = []

    def add(label: str, text: str) -> None:
        items.append(Negative(label, text))

    for _ in range(15):
        sha = v.hex(40)
        add("commit hash", f"Fixed in {sha} (see the revert of {v.hex(7)} for context).")
        add("git log line", f"commit {v.hex(40)}\nAuthor: Ana <ana@example.com>\n\n    Bump the retry budget")
        add("request uuid", f"Request {v.uuid()} failed with 502 at the load balancer; retried once.")
        add("trace id", f"trace_id={v.hex(32)} span_id={v.hex(16)} service=checkout")
        add("docker digest", f"Pinned the image to python@sha256:{v.hex(64)} after the CVE.")
        add("sha256 sum", f"{v.hex(64)}  memoryhub-0.1.0.tar.gz")
        add(
            "base64 image",
            "![logo](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA"
            + base64.b64encode(v.rng.randbytes(300)).decode()
            + ")",
        )
        add("uuid primary key", f"Memory {v.uuid()} was superseded by {v.uuid()}.")
        add("etag", f'ETag: "{v.hex(32)}" and Last-Modified: Tue, 03 Jun 2025 10:00:00 GMT')
        add("semver and build", f"Released 2.{v.rng.randint(0, 40)}.{v.rng.randint(0, 9)}+build.{v.hex(8)}")
    prose = [
        "The password policy requires 12 characters and a rotation every 90 days.",
        "Passwords are hashed with argon2id; never log them.",
        "We use a token bucket limiter: 60 requests per minute, bursts of 10.",
        "The key is in the vault under ops/db; ask Ana for access.",
        "Rotate the API key after every incident, and record it in the runbook.",
        "The token expired yesterday, so the nightly sync failed.",
        "Reset your password from the sign-in page if you forget it.",
        "Bearer tokens expire after one hour; refresh tokens after 30 days.",
        "The Authorization header is required on every request.",
        "Secrets live in the vault, never in memories or commits.",
        "Use a password manager; 1Password is the team's choice.",
        "The password is stored in Vault and injected at deploy time.",
        "The password is required for the admin console.",
        "Our access tokens are JWTs signed with RS256.",
        "Don't paste the API key into tickets; link the vault entry instead.",
        "A secret key must be at least 50 characters long in production.",
        "Login failed three times: wrong password, account locked for 15 minutes.",
        "The private key never leaves the HSM.",
        "Passphrases are easier to remember than passwords.",
        "Auth tokens are scoped per team and revocable.",
        "The token budget for the injection block is 2000 tokens.",
        "max_tokens should stay under the model's context window.",
        "The password field is masked on the sign-up form.",
        "The key rotation job runs every Sunday at 03:00 UTC.",
        "Keys and secrets are redacted from logs by the scrubber.",
    ]
    for text in prose:
        add("prose about credentials", text)
    code = [
        "def get_password(self) -> str:\n    return self._password",
        "password_hash = make_password(raw_password)",
        "token = tokenizer.encode(text)",
        'api_key = os.environ["OPENAI_API_KEY"]',
        'PASSWORD = env("DB_PASSWORD")',
        "password: ${DB_PASSWORD}",
        "secret_key: {{ vault_secret_key }}",
        "password = getpass.getpass()",
        "if not user.check_password(password):\n    raise PermissionDenied",
        "DB_PASSWORD=\nDB_USER=\nDB_HOST=",
        "password: str = Field(min_length=12)",
        'const token = localStorage.getItem("token");',
        "token_type: bearer\nexpires_in: 3600",
        "self.access_token = response.json()['access_token']",
        "def refresh_token(self, session):",
        "max_tokens = 4096",
        "TOKEN_EXPIRY_SECONDS = 3600",
        "password_reset_timeout = 259200",
        "client.set_password(username, new_password)",
        "secret = secrets.token_urlsafe(32)",
        "AUTH_PASSWORD_VALIDATORS = [...]",
        'password = request.POST["password"]',
        '<input type="password" name="password" autocomplete="current-password">',
        "export DB_PASSWORD=$(vault kv get -field=password secret/db)",
        "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256",
        "api_key: <your-api-key>",
        "password: changeme",
        "password=None",
        '{"password": "********"}',
        '{"password": ""}',
        "token: null",
        "PASSWORD: ${{ secrets.DB_PASSWORD }}",
        "createUser({ username, password })",
        "passwordInput.value = ''",
        "ssh -p 2222 deploy@bastion.internal",
        "docker run -u 1000:1000 -p 8080:80 nginx",
        "git push origin main --force-with-lease",
        "kubectl create secret generic db --from-file=password.txt",
        "SELECT id, token_hash FROM agent_tokens WHERE revoked_at IS NULL;",
        "cache_key = f'user:{user_id}:profile'",
        "tokens = text.split()",
        "api_version = '2024-06-01'",
        "pip install python-dotenv keyring",
        "mysql -u root -p shop  # prompts for the password",
        "psql --password -h db.internal app  # prompts",
        'curl -u "$CI_USER:$CI_PASSWORD" https://ci.internal/api/json',
        "curl https://api.example.com/v1/items?limit=50&page=2",
        "redis-cli -h cache.internal PING",
        "key = hashlib.sha256(content.encode()).hexdigest()",
        "secretary_email = 'ops@example.com'",
    ]
    for text in code:
        add("code identifier", text)
    urls = [
        "https://example.com/search?q=tokens&page=2",
        "https://docs.python.org/3/library/secrets.html#secrets.token_hex",
        "https://github.com/acme/memoryhub/pull/412?diff=split",
        "https://app.example.com/reset-password?step=2",
        "https://shop.example.com/cart?utm_source=newsletter&utm_medium=email&utm_campaign=spring",
        "https://example.com/api/v2/users?sort=-created&per_page=100",
        "https://grafana.internal/d/abc123/latency?orgId=1&from=now-6h&to=now",
        "https://example.com/callback?state=signup&code_challenge_method=S256",
        "http://localhost:8000/api/v1/teams/alpha/memories/?type=lesson",
        "https://maps.example.com/?ll=52.52,13.40&z=12",
        "https://example.com/login?next=/dashboard/",
        "https://cdn.example.com/assets/app.3f9a2c1b.js",
    ]
    for url in urls:
        add("url", f"See {url} for the details.")
    logs = [
        "2025-06-03T10:00:00Z INFO auth: user ana signed in from 10.0.0.4",
        "2025-06-03T10:00:01Z WARN auth: wrong password for user bob (attempt 2 of 5)",
        "2025-06-03T10:00:02Z INFO token created: name=ci scopes=read,write expires=90d",
        "2025-06-03T10:00:03Z ERROR payment failed: card_declined (request req_8fKq2)",
        "GET /api/v1/teams/alpha/memories/?limit=50 200 12ms",
        "celery@worker1 ready. Task search.index_memory[5d3c] succeeded in 0.21s",
    ]
    for text in logs:
        add("log line", text)
    for _ in range(70):
        kind = v.rng.randrange(8)
        if kind == 0:
            add(
                "table row",
                f"| {v.uuid()} | lesson | 2025-0{v.rng.randint(1, 9)}-1{v.rng.randint(0, 9)} | active |",
            )
        elif kind == 1:
            add(
                "config without secrets",
                f"timeout: {v.rng.randint(5, 60)}\nretries: 3\nregion: eu-west-1\nlog_level: info",
            )
        elif kind == 2:
            add(
                "json without secrets",
                f'{{"max_tokens": {v.rng.randint(256, 8192)}, "temperature": 0.2, "model": "small"}}',
            )
        elif kind == 3:
            add(
                "ids in prose",
                f"Ticket OPS-{v.rng.randint(100, 9999)} links commit {v.hex(12)} and run {v.rng.randint(10**6, 10**7)}.",
            )
        elif kind == 4:
            add(
                "ip and ports",
                f"db-0{v.rng.randint(1, 9)} listens on 10.0.{v.rng.randint(0, 255)}.{v.rng.randint(1, 254)}:5432",
            )
        elif kind == 5:
            add(
                "email",
                f"Contact {v.pick(['ana', 'bob', 'chen'])}.{v.pick(['ops', 'dev'])}@example.com about the rollout.",
            )
        elif kind == 6:
            add(
                "markdown", f"## Decision\n\nWe chose Postgres over Mongo ({v.rng.randint(2, 9)} votes to 1)."
            )
        else:
            add("checksum line", f"md5 {v.hex(32)} of the backup taken at 03:00")
    return items
