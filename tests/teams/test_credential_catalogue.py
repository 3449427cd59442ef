"""The vendored gitleaks rule set: unedited, every rule compiled under RE2 or dropped
with its reason (counted), and the refresh command's extraction."""

from __future__ import annotations

import hashlib

import pytest
from django.core.management.base import CommandError

from teams.credential_catalogue import CATALOGUE_FILE, catalogue, recorded_sha256
from teams.management.commands.refresh_credential_catalogue import CONFIG_HEADER, _check, _embedded_config

# gitleaks 8.30.1: its rules that match files by path (we scan texts, which have none).
DROPPED_FOR_PATHS = {
    "freemius-secret-key",
    "hashicorp-tf-password",
    "kubernetes-secret-yaml",
    "nuget-config-password",
    "pkcs12-file",
}


def test_the_vendored_rule_set_is_the_upstream_file_unedited() -> None:
    assert hashlib.sha256(CATALOGUE_FILE.read_bytes()).hexdigest() == recorded_sha256()


def test_every_rule_compiles_under_re2_or_is_dropped_and_counted() -> None:
    rules = catalogue()

    assert len(rules.rules) + len(rules.dropped) == rules.total == 222
    assert set(rules.dropped) == DROPPED_FOR_PATHS
    assert all(reason == "applies to files by path, not to text" for reason in rules.dropped.values())
    # Rules rewritten for speed (the lead run before the keyword removed), all still compiled.
    assert len(rules.rewritten) == 100
    assert set(rules.rewritten) <= {rule.kind for rule in rules.rules}


def test_the_generic_rule_runs_last_and_keywords_select_rules() -> None:
    rules = catalogue()

    assert rules.rules[-1].kind == "generic-api-key"
    chosen = {rule.kind for rule in rules.rules_to_run(b"deploy with SHPAT_ and a twilio SK key")}
    assert {"shopify-access-token", "twilio-api-key", "generic-api-key"} <= chosen
    assert rules.rules_to_run(b"deploy on Tuesday, then review the logs") == []


def test_the_refresh_command_cuts_the_config_out_of_a_binary() -> None:
    rules = b"".join(b'[[rules]]\nid = "r%d"\nregex = "y"\n' % i for i in range(120))
    config = CONFIG_HEADER + b'\ntitle = "gitleaks config"\n' + rules
    binary = b"\x7fELF\x00junk" + config + b"\x00\x00more strings"

    extracted = _embedded_config(binary)

    assert extracted == config
    assert len(_check(extracted)) == 120


@pytest.mark.parametrize(
    "text", [b"title = 'not it'\n", CONFIG_HEADER + b"\n[[rules]]\nid = 1\n", CONFIG_HEADER + b"[["]
)
def test_the_refresh_command_refuses_what_is_not_gitleaks_rule_set(text: bytes) -> None:
    with pytest.raises(CommandError):
        _check(text)
