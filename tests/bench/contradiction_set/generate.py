"""Writes generated.jsonl: labelled pairs of team memories, generated from families of
templates over many subjects and values (`python -m tests.bench.contradiction_set.generate`).

Each family is one way a team writes two entries: a runbook and a warning about it,
a rule and its exception, two cards of one template about different subjects, a config
note and another attribute of the same system, and true reversals (a provider change,
a version bump, a policy flip, a value changed). A family belongs to one split, `tune`
or `held_out`, as a whole: the held-out families are other phrasings of the same kinds,
so no template the detector was tuned on is in the figures reported.

The output is deterministic (a seeded generator per family). Hand-written pairs are in
hand_written.jsonl beside this file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).with_name("generated.jsonl")
TUNE, HELD_OUT = "tune", "held_out"

SERVICES = [
    "billing-api", "search-indexer", "auth-gateway", "notifications", "ledger", "reporting-worker",
    "checkout", "image-resizer", "export-service", "webhooks-relay", "admin-portal", "mobile-bff",
    "inventory-sync", "pricing-engine", "email-sender", "audit-log", "feature-store", "invoice-renderer",
    "geo-lookup", "session-store", "media-transcoder", "catalog-api", "fraud-scorer", "payouts",
]  # fmt: skip
TEAMS = ["Payments", "Platform", "Search", "Growth", "Identity", "Data", "Mobile", "Infra", "Billing", "Core"]
PEOPLE = [
    "Alice", "Bob", "Priya", "Chen", "Marta", "Tomasz", "Aisha", "Diego", "Yuki", "Olu", "Sven",
    "Fatima", "Liam", "Noor", "Kenji", "Ines", "Rafael", "Hannah", "Wei", "Zoe",
]  # fmt: skip
COMPANIES = [
    "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Soylent", "Vandelay", "Tyrell", "Cyberdyne",
    "Wonka", "Oscorp", "Massive Dynamic", "Stark Industries", "Wayne Enterprises", "Pied Piper",
    "Dunder Mifflin", "Aperture", "Gringotts", "Monarch", "Nakatomi",
]  # fmt: skip
PLANS = ["Starter", "Team", "Business", "Enterprise"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
ENVS = ["staging", "production", "the sandbox", "the demo environment", "QA"]
REGIONS = ["eu-west-1", "us-east-1", "us-west-2", "eu-central-1", "ap-southeast-2", "ca-central-1"]
PROVIDERS = {
    "payments": ["Stripe", "Paddle", "Adyen", "Braintree"],
    "transactional email": ["SendGrid", "Postmark", "Mailgun", "Amazon SES"],
    "error tracking": ["Sentry", "Rollbar", "Bugsnag", "Honeybadger"],
    "CI": ["Jenkins", "GitHub Actions", "CircleCI", "Buildkite"],
    "feature flags": ["LaunchDarkly", "Unleash", "Flagsmith", "ConfigCat"],
    "product analytics": ["Mixpanel", "Amplitude", "PostHog", "Heap"],
    "log shipping": ["Papertrail", "Loki", "Splunk", "Logtail"],
    "secrets": ["Vault", "Doppler", "AWS Secrets Manager", "Infisical"],
    "single sign-on": ["Okta", "Auth0", "Keycloak", "OneLogin"],
    "the job queue": ["RabbitMQ", "SQS", "Kafka", "Celery on Redis"],
    "uptime checks": ["Pingdom", "Better Uptime", "UptimeRobot", "Checkly"],
    "the CDN": ["Cloudflare", "Fastly", "CloudFront", "Bunny"],
    "on-call paging": ["PagerDuty", "Opsgenie", "incident.io", "Squadcast"],
    "issue tracking": ["Jira", "Linear", "Shortcut", "YouTrack"],
}
TECH_VERSIONS = {
    "Postgres": ["13", "14", "15", "16"],
    "Python": ["3.10", "3.11", "3.12", "3.13"],
    "Node": ["18", "20", "22"],
    "Django": ["4.2", "5.0", "5.1"],
    "React": ["17", "18", "19"],
    "Kubernetes": ["1.27", "1.28", "1.29", "1.30"],
    "Redis": ["6.2", "7.0", "7.2"],
    "Java": ["11", "17", "21"],
    "Ruby": ["3.1", "3.2", "3.3"],
    "Terraform": ["1.5", "1.6", "1.7"],
    "Elasticsearch": ["7.17", "8.11", "8.13"],
    "Go": ["1.21", "1.22", "1.23"],
}
SETTINGS_ATTRS = [
    ("request timeout", "seconds", [5, 10, 15, 30, 60]),
    ("connection pool size", "", [10, 20, 40, 80]),
    ("retry limit", "attempts", [3, 5, 8, 10]),
    ("log retention", "days", [7, 14, 30, 90]),
    ("worker count", "", [2, 4, 8, 16]),
    ("cache TTL", "minutes", [5, 15, 30, 60]),
    ("max upload size", "MB", [10, 25, 50, 100]),
    ("batch size", "rows", [500, 1000, 5000]),
]
RUNBOOKS = [
    ("run the database migrations", "migrations", [
        "take a snapshot of the primary", "run migration shard 1 and verify row counts",
        "run the remaining shards one at a time", "check replication lag is under 5 seconds",
    ], "run the migrations against production", "a fresh backup"),
    ("rotate the API signing keys", "key rotation", [
        "generate the new key pair in Vault", "publish the new public key to the JWKS endpoint",
        "wait one hour for caches to expire", "switch signing to the new key and retire the old one",
    ], "retire the old signing key", "waiting for the JWKS caches to expire"),
    ("restore a customer database from backup", "restores", [
        "pick the snapshot closest to the incident", "restore it into a scratch instance",
        "diff the affected tables against production", "copy the missing rows back with the restore script",
    ], "restore straight over the production database", "a scratch copy first"),
    ("fail over the primary database", "failover", [
        "page the database on-call", "promote the replica with the failover script",
        "point PgBouncer at the new primary", "rebuild the old primary as a replica",
    ], "promote a replica", "paging the database on-call"),
    ("purge the CDN cache", "cache purges", [
        "open the CDN console", "purge by surrogate key for the affected pages",
        "verify the pages from two regions", "post in the incident channel",
    ], "purge the whole CDN cache", "approval from the on-call lead"),
    ("reindex the search cluster", "reindexing", [
        "create the new index with the current mapping", "run the reindex job with 4 workers",
        "compare document counts", "flip the alias to the new index",
    ], "delete the old index", "flipping the alias and checking counts"),
    ("scale the checkout workers for a sale", "scaling", [
        "raise the HPA minimum to 20 pods", "warm the product cache",
        "watch the p95 latency dashboard", "lower the minimum again the next morning",
    ], "scale checkout below 20 pods during a sale", "checking the sale calendar"),
    ("ship a hotfix", "hotfixes", [
        "branch from the release tag", "cherry-pick the fix and run the smoke tests",
        "deploy to staging and verify", "deploy to production and tag the release",
    ], "deploy a hotfix to production", "running the smoke tests on staging"),
    ("onboard a new engineer", "onboarding", [
        "create their SSO account", "add them to the GitHub team",
        "grant read access to the staging database", "book the architecture walkthrough",
    ], "grant production database access", "a manager's approval"),
    ("renew the TLS certificates", "certificate renewals", [
        "run certbot renew on the edge nodes", "reload nginx one node at a time",
        "check the expiry date from outside", "update the expiry in the calendar",
    ], "reload every edge node at once", "draining traffic from it"),
]  # fmt: skip


@dataclass(frozen=True)
class Family:
    name: str
    split: str
    category: str
    contradicts: bool
    make: Callable[[random.Random], tuple[str, str, str, str]]  # old_key, old, new_key, new
    count: int = 16


def slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def two(rng: random.Random, values: list[str]) -> tuple[str, str]:
    first, second = rng.sample(values, 2)
    return first, second


def pick_provider(rng: random.Random) -> tuple[str, str, str]:
    area = rng.choice(sorted(PROVIDERS))
    old, new = two(rng, PROVIDERS[area])
    return area, old, new


def pick_version(rng: random.Random) -> tuple[str, str, str]:
    tech = rng.choice(sorted(TECH_VERSIONS))
    versions = TECH_VERSIONS[tech]
    index = rng.randrange(len(versions) - 1)
    return tech, versions[index], versions[index + 1]


# ----------------------------------------------------------------- true reversals


def provider_switch(rng: random.Random) -> tuple[str, str, str, str]:
    area, old, new = pick_provider(rng)
    olds = [f"We use {old} for {area}.", f"We route {area} through {old}.", f"Our {area} provider is {old}."]
    news = [
        f"We moved {area} to {new}.",
        f"We switched {area} from {old} to {new} last month.",
        f"{area.capitalize()} now runs on {new} instead of {old}.",
    ]
    return f"{slug(area)}-provider", rng.choice(olds), f"{slug(area)}-provider-change", rng.choice(news)


def provider_replaced(rng: random.Random) -> tuple[str, str, str, str]:
    area, old, new = pick_provider(rng)
    olds = [f"{old} handles {area} for every service.", f"For {area} we rely on {old}."]
    news = [
        f"{new} replaced {old} for {area} in the spring.",
        f"We migrated {area} off {old}; it is on {new} now.",
        f"{area.capitalize()}: we dropped {old} and adopted {new}.",
    ]
    return f"{slug(area)}-tooling", rng.choice(olds), f"{slug(area)}-migration", rng.choice(news)


def version_bump(rng: random.Random) -> tuple[str, str, str, str]:
    tech, old, new = pick_version(rng)
    olds = [
        f"Production runs {tech} {old}.",
        f"We are on {tech} {old} everywhere.",
        f"The services use {tech} {old}.",
    ]
    news = [
        f"We upgraded {tech} to {new} in production.",
        f"Production is on {tech} {new} now.",
        f"{tech} was bumped from {old} to {new} across the services.",
    ]
    return f"{slug(tech)}-version", rng.choice(olds), f"{slug(tech)}-upgrade", rng.choice(news)


def version_bump_held(rng: random.Random) -> tuple[str, str, str, str]:
    tech, old, new = pick_version(rng)
    service = rng.choice(SERVICES)
    olds = [f"{service} is built on {tech} {old}.", f"{service} targets {tech} {old}."]
    news = [f"{service} moved to {tech} {new}.", f"{service} now targets {tech} {new}."]
    return f"{service}-stack", rng.choice(olds), f"{service}-stack-upgrade", rng.choice(news)


def policy_flip(rng: random.Random) -> tuple[str, str, str, str]:
    day = rng.choice(WEEKDAYS)
    subject = rng.choice(["deploys", "schema migrations", "production releases", "infrastructure changes"])
    pairs = [
        (
            f"{subject.capitalize()} on {day}s are allowed.",
            f"{subject.capitalize()} on {day}s are not allowed anymore.",
        ),
        (f"Never do {subject} on {day}s.", f"We do {subject} on {day}s now."),
        (
            f"{subject.capitalize()} are allowed on {day}s.",
            f"{subject.capitalize()} are forbidden on {day}s.",
        ),
        (f"We do {subject} on {day}s.", f"We no longer do {subject} on {day}s."),
    ]
    old, new = rng.choice(pairs)
    return f"{slug(subject)}-{day.lower()}", old, f"{slug(subject)}-{day.lower()}-policy", new


def flag_flip(rng: random.Random) -> tuple[str, str, str, str]:
    flag = rng.choice(
        ["new-checkout", "dark-mode", "bulk-export", "ai-summaries", "sso-only-login", "v2-search"]
    )
    env = rng.choice(ENVS)
    on, off = (f"The {flag} flag is enabled in {env}.", f"The {flag} flag is disabled in {env}.")
    old, new = (on, off) if rng.random() < 0.5 else (off, on)
    return f"flag-{flag}", old, f"flag-{flag}-now", new


def review_rule_change(rng: random.Random) -> tuple[str, str, str, str]:
    repo = rng.choice(
        ["the monorepo", "the mobile app repo", "the infra repo", "the API repo", "the docs site"]
    )
    a, b = two(rng, ["one approval", "two approvals", "three approvals"])
    olds = [f"Pull requests in {repo} need {a}.", f"Merging into {repo} requires {a}."]
    news = [f"Pull requests in {repo} need {b} now.", f"Merging into {repo} requires {b} from now on."]
    return f"review-{slug(repo)}", rng.choice(olds), f"review-{slug(repo)}-change", rng.choice(news)


def setting_change(rng: random.Random) -> tuple[str, str, str, str]:
    service = rng.choice(SERVICES)
    attr, unit, values = rng.choice(SETTINGS_ATTRS)
    old, new = (str(v) for v in rng.sample(values, 2))
    u = f" {unit}" if unit else ""
    olds = [f"The {service} {attr} is {old}{u}.", f"{service}: {attr} set to {old}{u}."]
    news = [
        f"The {service} {attr} is {new}{u}.",
        f"The {service} {attr} was changed to {new}{u}.",
        f"{service}: {attr} is now {new}{u}.",
    ]
    return f"{service}-{slug(attr)}", rng.choice(olds), f"{service}-{slug(attr)}-new", rng.choice(news)


def schedule_move(rng: random.Random) -> tuple[str, str, str, str]:
    meeting = rng.choice(
        [
            "The sprint review",
            "Backlog grooming",
            "The architecture sync",
            "The release train",
            "The on-call handover",
            "The incident review",
        ]
    )
    old, new = two(rng, WEEKDAYS)
    olds = [f"{meeting} is on {old}s.", f"{meeting} happens every {old}."]
    news = [f"{meeting} moved to {new}s.", f"{meeting} happens every {new} from now on."]
    return f"{slug(meeting)}-day", rng.choice(olds), f"{slug(meeting)}-day-moved", rng.choice(news)


def ownership_change(rng: random.Random) -> tuple[str, str, str, str]:
    service = rng.choice(SERVICES)
    old, new = two(rng, TEAMS)
    olds = [f"{service} is owned by the {old} team.", f"The {old} team owns {service}."]
    news = [f"The {new} team took over {service} from {old}.", f"{service} is owned by the {new} team now."]
    return f"{service}-owner", rng.choice(olds), f"{service}-owner-change", rng.choice(news)


def region_move(rng: random.Random) -> tuple[str, str, str, str]:
    service = rng.choice(SERVICES)
    old, new = two(rng, REGIONS)
    olds = [f"{service} is hosted in {old}.", f"{service} runs in {old}."]
    news = [f"We migrated {service} from {old} to {new}.", f"{service} runs in {new} now."]
    return f"{service}-region", rng.choice(olds), f"{service}-region-move", rng.choice(news)


def retirement(rng: random.Random) -> tuple[str, str, str, str]:
    area, old, _new = pick_provider(rng)
    olds = [f"{old} is what we use for {area}.", f"Everything for {area} goes through {old}."]
    news = [
        f"We no longer use {old} for {area}.",
        f"We stopped using {old} for {area}.",
        f"{old} was retired for {area}.",
    ]
    return (
        f"{slug(area)}-{slug(old)}",
        rng.choice(olds),
        f"{slug(area)}-{slug(old)}-retired",
        rng.choice(news),
    )


def frequency_change(rng: random.Random) -> tuple[str, str, str, str]:
    thing = rng.choice(
        [
            "Backups of the orders database",
            "Dependency updates",
            "Access reviews",
            "Restore drills",
            "Secret rotations",
            "Cost reports",
        ]
    )
    old, new = two(rng, ["hourly", "daily", "weekly", "monthly", "quarterly"])
    return (
        f"{slug(thing)}-cadence",
        f"{thing} run {old}.",
        f"{slug(thing)}-cadence-new",
        f"{thing} run {new} now.",
    )


def limit_change(rng: random.Random) -> tuple[str, str, str, str]:
    what = rng.choice(
        [
            "The public API rate limit",
            "The webhook retry budget",
            "The per-team storage quota",
            "The login attempt limit",
        ]
    )
    old, new = (str(v) for v in rng.sample([50, 100, 200, 500, 1000], 2))
    unit = rng.choice(["per minute", "per hour", "per day"])
    return (
        f"{slug(what)}",
        f"{what} is {old} {unit}.",
        f"{slug(what)}-raised",
        f"{what} was changed to {new} {unit}.",
    )


# ----------------------------------------------------------------- not contradictions


def runbook_then_warning(rng: random.Random) -> tuple[str, str, str, str]:
    task, topic, steps, danger, guard = rng.choice(RUNBOOKS)
    runbook = f"Runbook: {task}. " + " ".join(f"Step {i}: {s}." for i, s in enumerate(steps, 1))
    warning = rng.choice(
        [
            f"Do not {danger} without {guard}.",
            f"Never {danger} without {guard}.",
            f"Don't {danger} before {guard}.",
        ]
    )
    return f"runbook-{slug(topic)}", runbook, f"warning-{slug(topic)}", warning


def warning_then_runbook(rng: random.Random) -> tuple[str, str, str, str]:
    task, topic, steps, danger, guard = rng.choice(RUNBOOKS)
    warning = rng.choice(
        [f"Careful: never {danger} without {guard}.", f"Do not {danger} unless you have {guard}."]
    )
    runbook = f"How to {task}:\n" + "\n".join(f"{i}. {s[0].upper()}{s[1:]}" for i, s in enumerate(steps, 1))
    return f"warning-{slug(topic)}", warning, f"howto-{slug(topic)}", runbook


def runbook_vs_runbook(rng: random.Random) -> tuple[str, str, str, str]:
    (t1, p1, s1, _, _), (t2, p2, s2, _, _) = rng.sample(RUNBOOKS, 2)
    first = f"Runbook: {t1}. " + " ".join(f"Step {i}: {s}." for i, s in enumerate(s1, 1))
    second = f"Runbook: {t2}. " + " ".join(f"Step {i}: {s}." for i, s in enumerate(s2, 1))
    return f"runbook-{slug(p1)}", first, f"runbook-{slug(p2)}", second


def step_list_vs_note(rng: random.Random) -> tuple[str, str, str, str]:
    task, topic, steps, _danger, _guard = rng.choice(RUNBOOKS)
    checklist = f"Checklist to {task}:\n" + "\n".join(f"- {s}" for s in steps)
    note = rng.choice(
        [
            f"Last time we had to {task}, step 2 took about forty minutes.",
            f"The {topic} checklist was reviewed in the incident retro; keep it as it is.",
            f"Ask in #ops before you {task} on a weekday afternoon.",
        ]
    )
    return f"checklist-{slug(topic)}", checklist, f"note-{slug(topic)}", note


def rule_and_exception(rng: random.Random) -> tuple[str, str, str, str]:
    day = rng.choice(WEEKDAYS)
    rule, exception = rng.choice(
        [
            (
                f"Never deploy on {day}s.",
                f"Hotfixes may be deployed on {day}s with approval from the on-call lead.",
            ),
            (
                "Do not merge without a green CI run.",
                "Exception: docs-only changes can be merged while CI is red on main.",
            ),
            (
                "No direct pushes to main.",
                "Release managers may push version bumps to main directly during a release.",
            ),
            (
                "Do not use the production database for analytics queries.",
                "Analytics queries may run on the production read replica outside business hours.",
            ),
            (
                "All services must log in JSON.",
                "Except the legacy billing cron, which logs plain text until it is rewritten.",
            ),
            (
                "Never store customer data in the logs.",
                "Customer ids may appear in the logs; names and emails must not.",
            ),
            (
                "Feature work pauses during the code freeze.",
                "Security fixes are exempt from the code freeze.",
            ),
            (
                f"Nobody is on call on {day} nights.",
                f"During launches someone from the Platform team is on call on {day} nights too.",
            ),
        ]
    )
    return f"rule-{rng.randrange(10**6)}", rule, f"rule-exception-{rng.randrange(10**6)}", exception


def service_cards(rng: random.Random) -> tuple[str, str, str, str]:
    a, b = two(rng, SERVICES)

    def card(service: str) -> str:
        return (
            f"{service}: owned by {rng.choice(TEAMS)}, on-call {rng.choice(PEOPLE)}, port {rng.choice([8080, 8081, 9000, 9090, 3000, 5000])}, "
            f"deploys on {rng.choice(WEEKDAYS)}s."
        )

    return f"service-{a}", card(a), f"service-{b}", card(b)


def customer_notes(rng: random.Random) -> tuple[str, str, str, str]:
    a, b = two(rng, COMPANIES)

    def note(company: str) -> str:
        return (
            f"Customer {company} is on the {rng.choice(PLANS)} plan; renewal in {rng.choice(MONTHS)}; "
            f"main contact {rng.choice(PEOPLE)}."
        )

    return f"customer-{slug(a)}", note(a), f"customer-{slug(b)}", note(b)


def env_config(rng: random.Random) -> tuple[str, str, str, str]:
    a, b = two(rng, ["staging", "production", "qa", "sandbox", "demo", "perf"])
    size = lambda: rng.choice([10, 20, 40, 80])  # noqa: E731

    def line(env: str) -> str:
        return f"The {env} database host is db-{env}.internal and its pool size is {size()}."

    return f"db-{a}", line(a), f"db-{b}", line(b)


def incident_summaries(rng: random.Random) -> tuple[str, str, str, str]:
    ids = rng.sample(range(100, 999), 2)

    def summary(number: int) -> str:
        service = rng.choice(SERVICES)
        cause = rng.choice(
            [
                "an expired certificate",
                "a full disk",
                "a bad config push",
                "a slow query",
                "a DNS change",
                "a memory leak",
            ]
        )
        fix = rng.choice(
            [
                "rolled back",
                "renewed the certificate",
                "added an index",
                "restarted the pods",
                "reverted the config",
            ]
        )
        return f"Incident INC-{number} on {rng.choice(MONTHS)} {rng.randint(1, 28)}: {service} was down for {rng.randint(5, 90)} minutes because of {cause}; we {fix}."

    return f"incident-inc-{ids[0]}", summary(ids[0]), f"incident-inc-{ids[1]}", summary(ids[1])


def release_notes(rng: random.Random) -> tuple[str, str, str, str]:
    minor = rng.randint(1, 9)
    a, b = rng.sample(range(0, 12), 2)

    def feature() -> str:
        return rng.choice(
            [
                "bulk export",
                "SSO for teams",
                "faster search",
                "audit log filters",
                "dark mode",
                "webhook retries",
            ]
        )

    def note(patch: int) -> str:
        return f"Release 2.{minor}.{patch} shipped on {rng.choice(MONTHS)} {rng.randint(1, 28)} with {feature()}."

    return f"release-2-{minor}-{a}", note(a), f"release-2-{minor}-{b}", note(b)


def people_cards(rng: random.Random) -> tuple[str, str, str, str]:
    a, b = two(rng, PEOPLE)

    def card(person: str) -> str:
        return f"{person} works in the {rng.choice(TEAMS)} team, is based in {rng.choice(['Berlin', 'Lisbon', 'Toronto', 'Lagos', 'Pune', 'Osaka', 'Austin'])} and reviews {rng.choice(SERVICES)} changes."

    return f"person-{a.lower()}", card(a), f"person-{b.lower()}", card(b)


def job_records(rng: random.Random) -> tuple[str, str, str, str]:
    job = rng.choice(["orders-export", "search-reindex", "invoice-run", "usage-rollup"])
    d1, d2 = rng.sample(range(1, 29), 2)
    month = rng.choice(MONTHS)

    def record(day: int) -> str:
        return f"Nightly {job} on {month} {day}: {rng.randint(1000, 90000)} rows processed in {rng.randint(2, 40)} minutes, status {rng.choice(['ok', 'ok', 'ok', 'retried'])}."

    return f"{job}-{month.lower()}-{d1}", record(d1), f"{job}-{month.lower()}-{d2}", record(d2)


def standup_notes(rng: random.Random) -> tuple[str, str, str, str]:
    d1, d2 = rng.sample(range(1, 29), 2)
    month = rng.choice(MONTHS)

    def note(day: int) -> str:
        return f"Standup {month} {day}: {rng.choice(PEOPLE)} is blocked on {rng.choice(SERVICES)}; {rng.choice(PEOPLE)} is pairing on {rng.choice(SERVICES)}."

    return f"standup-{month.lower()}-{d1}", note(d1), f"standup-{month.lower()}-{d2}", note(d2)


def other_attribute(rng: random.Random) -> tuple[str, str, str, str]:
    service = rng.choice(SERVICES)
    (a1, u1, v1), (a2, u2, v2) = rng.sample(SETTINGS_ATTRS, 2)
    first = f"The {service} {a1} is {rng.choice(v1)}{' ' + u1 if u1 else ''}."
    second = f"The {service} {a2} is {rng.choice(v2)}{' ' + u2 if u2 else ''}."
    return f"{service}-{slug(a1)}", first, f"{service}-{slug(a2)}", second


def same_attribute_other_service(rng: random.Random) -> tuple[str, str, str, str]:
    s1, s2 = two(rng, SERVICES)
    attr, unit, values = rng.choice(SETTINGS_ATTRS)
    u = f" {unit}" if unit else ""
    first = f"The {s1} {attr} is {rng.choice(values)}{u}."
    second = f"The {s2} {attr} is {rng.choice(values)}{u}."
    return f"{s1}-{slug(attr)}", first, f"{s2}-{slug(attr)}", second


def provider_refinement(rng: random.Random) -> tuple[str, str, str, str]:
    area, provider, _ = pick_provider(rng)
    olds = [f"We use {provider} for {area}.", f"We route {area} through {provider}."]
    news = [
        f"{provider} alerts for {area} go to the #ops channel.",
        f"The {provider} account for {area} is managed by the {rng.choice(TEAMS)} team.",
        f"{provider} credentials for {area} live in the vault under {slug(area)}.",
        f"Our {provider} contract for {area} renews in {rng.choice(MONTHS)}.",
    ]
    return (
        f"{slug(area)}-provider",
        rng.choice(olds),
        f"{slug(area)}-{slug(provider)}-notes",
        rng.choice(news),
    )


def paraphrase(rng: random.Random) -> tuple[str, str, str, str]:
    tech, version, _ = pick_version(rng)
    day = rng.choice(WEEKDAYS)
    old, new = rng.choice(
        [
            (f"Production runs {tech} {version}.", f"Our production stack is on {tech} {version}."),
            (f"Deploys go out on {day}s.", f"We ship deploys every {day}."),
            (f"The release train leaves on {day}s.", f"Releases are cut every {day} morning."),
            (
                f"{tech} {version} is the supported version.",
                f"Stick to {tech} {version}; it is what we support.",
            ),
        ]
    )
    return f"note-{rng.randrange(10**6)}", old, f"note-{rng.randrange(10**6)}", new


def flags_per_feature(rng: random.Random) -> tuple[str, str, str, str]:
    f1, f2 = two(
        rng,
        [
            "new-checkout",
            "dark-mode",
            "bulk-export",
            "ai-summaries",
            "sso-only-login",
            "v2-search",
            "beta-billing",
        ],
    )
    env = rng.choice(ENVS)
    return (
        f"flag-{f1}",
        f"The {f1} flag is enabled in {env}.",
        f"flag-{f2}",
        f"The {f2} flag is disabled in {env}.",
    )


def repo_visibility(rng: random.Random) -> tuple[str, str, str, str]:
    r1, r2 = two(
        rng, ["docs", "infra", "design-system", "sdk-python", "sdk-js", "terraform-modules", "website"]
    )
    return f"repo-{r1}", f"The {r1} repository is public.", f"repo-{r2}", f"The {r2} repository is private."


def env_policies(rng: random.Random) -> tuple[str, str, str, str]:
    e1, e2 = two(rng, ["Staging", "Production", "QA", "Sandbox"])
    thing = rng.choice(["deploys", "database migrations", "certificate renewals", "cache warmups"])
    return (
        f"{e1.lower()}-{slug(thing)}",
        f"{e1} {thing} are automatic.",
        f"{e2.lower()}-{slug(thing)}",
        f"{e2} {thing} are manual.",
    )


def negated_other_object(rng: random.Random) -> tuple[str, str, str, str]:
    store = rng.choice(["the analytics warehouse", "S3", "the shared drive", "Redis"])
    d1, d2 = two(
        rng,
        [
            "card numbers",
            "raw passwords",
            "session tokens",
            "order totals",
            "page views",
            "feature usage counts",
        ],
    )
    return (
        f"storage-{slug(d2)}",
        f"We store {d2} in {store}.",
        f"storage-{slug(d1)}",
        f"We do not store {d1} in {store}.",
    )


def unrelated_same_domain(rng: random.Random) -> tuple[str, str, str, str]:
    s1, s2 = two(rng, SERVICES)
    facts = [
        f"{s1} retries failed webhooks with exponential backoff.",
        f"The {s1} dashboards are in the Platform folder in Grafana.",
        f"{s1} reads its config from environment variables only.",
        f"Load tests for {s1} live in the perf repo.",
    ]
    others = [
        f"{s2} writes its audit events to the audit-log service.",
        f"Alerts for {s2} page the {rng.choice(TEAMS)} rotation.",
        f"{s2} has no staging deploy; test it locally with docker compose.",
        f"The {s2} README explains how to seed test data.",
    ]
    return f"{s1}-note", rng.choice(facts), f"{s2}-note", rng.choice(others)


FAMILIES = [
    # True reversals: each kind has a tuned phrasing and a held-out one.
    Family("provider_switch", TUNE, "provider change", True, provider_switch, 24),
    Family("provider_replaced", HELD_OUT, "provider change", True, provider_replaced, 24),
    Family("version_bump", TUNE, "version bump", True, version_bump, 20),
    Family("version_bump_service", HELD_OUT, "version bump", True, version_bump_held, 20),
    Family("policy_flip", TUNE, "policy flip", True, policy_flip, 20),
    Family("flag_flip", HELD_OUT, "policy flip", True, flag_flip, 12),
    Family("review_rule_change", HELD_OUT, "policy flip", True, review_rule_change, 10),
    Family("setting_change", TUNE, "config value change", True, setting_change, 20),
    Family("limit_change", HELD_OUT, "config value change", True, limit_change, 14),
    Family("schedule_move", TUNE, "schedule change", True, schedule_move, 12),
    Family("frequency_change", HELD_OUT, "schedule change", True, frequency_change, 12),
    Family("ownership_change", TUNE, "ownership change", True, ownership_change, 12),
    Family("region_move", HELD_OUT, "hosting change", True, region_move, 12),
    Family("retirement", TUNE, "tool retired", True, retirement, 14),
    # Not contradictions.
    Family("runbook_then_warning", TUNE, "runbook and warning", False, runbook_then_warning, 18),
    Family("warning_then_runbook", HELD_OUT, "runbook and warning", False, warning_then_runbook, 18),
    Family("runbook_vs_runbook", TUNE, "step lists", False, runbook_vs_runbook, 10),
    Family("step_list_vs_note", HELD_OUT, "step lists", False, step_list_vs_note, 12),
    Family("rule_and_exception", TUNE, "rule and exception", False, rule_and_exception, 16),
    Family("service_cards", TUNE, "template entries", False, service_cards, 20),
    Family("customer_notes", HELD_OUT, "template entries", False, customer_notes, 20),
    Family("env_config", TUNE, "template entries", False, env_config, 12),
    Family("incident_summaries", HELD_OUT, "template entries", False, incident_summaries, 14),
    Family("release_notes", TUNE, "template entries", False, release_notes, 14),
    Family("people_cards", HELD_OUT, "template entries", False, people_cards, 12),
    Family("job_records", HELD_OUT, "template entries", False, job_records, 14),
    Family("standup_notes", TUNE, "template entries", False, standup_notes, 12),
    Family("other_attribute", TUNE, "config notes", False, other_attribute, 14),
    Family("same_attribute_other_service", HELD_OUT, "config notes", False, same_attribute_other_service, 16),
    Family("provider_refinement", HELD_OUT, "refinement", False, provider_refinement, 14),
    Family("paraphrase", TUNE, "agreeing paraphrase", False, paraphrase, 12),
    Family("flags_per_feature", HELD_OUT, "opposites about other subjects", False, flags_per_feature, 10),
    Family("repo_visibility", TUNE, "opposites about other subjects", False, repo_visibility, 8),
    Family("env_policies", HELD_OUT, "opposites about other subjects", False, env_policies, 8),
    Family("negated_other_object", TUNE, "negation about another object", False, negated_other_object, 10),
    Family("unrelated_same_domain", HELD_OUT, "unrelated", False, unrelated_same_domain, 12),
]


def generate() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for family in FAMILIES:
        rng = random.Random(f"contradiction-set:{family.name}")
        seen: set[tuple[str, str]] = set()
        attempts = 0
        while len(seen) < family.count and attempts < family.count * 50:
            attempts += 1
            old_key, old, new_key, new = family.make(rng)
            if (old, new) in seen or old == new or old_key == new_key:
                continue
            seen.add((old, new))
            rows.append(
                {
                    "id": f"{family.name}-{len(seen)}",
                    "family": family.name,
                    "split": family.split,
                    "category": family.category,
                    "contradicts": family.contradicts,
                    "old_key": old_key,
                    "old": old,
                    "new_key": new_key,
                    "new": new,
                }
            )
    return rows


def main() -> None:
    rows = generate()
    with OUT.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} pairs to {OUT}")


if __name__ == "__main__":
    main()
