"""The contradiction detector: its rules, the candidate band, the nudge text,
its cost on hostile input, and its quality on the labelled set with the bundled embedder."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from freshness.contradictions import (
    BAND_FLOOR,
    DEFAULT_DUPLICATE_THRESHOLD,
    INJECT_CONFIDENCE,
    MAX_JUDGED_CHARS,
    MAX_QUOTE_CHARS,
    RULE_CONFIDENCE,
    Label,
    contradiction_message,
    judge_pair,
    select_candidates,
)
from teams.models import Team
from tests.bench import contradiction_set as cs
from tests.freshness import labelled_pairs as lp
from tests.linear_time import assert_linear_time

# A similarity inside the band, for rule tests that are not about the band.
IN_BAND = 0.75


def _label(old: str, new: str, similarity: float = IN_BAND) -> Label:
    return judge_pair(new, old, similarity).label


# --------------------------------------------------------------------------- rules


def test_a_switch_from_one_thing_to_another_contradicts_the_old_statement() -> None:
    verdict = judge_pair("We switched from Stripe to Paddle for billing.", "Payments go through Stripe.", 0.6)

    assert verdict.label == Label.CONTRADICTING
    assert "stripe" in verdict.reason
    assert verdict.subject == ("stripe",)


def test_a_statement_contradicts_an_older_switch_away_from_it() -> None:
    assert _label("We moved staging from Heroku to Fly.io.", "Staging runs on Heroku.") == Label.CONTRADICTING


def test_instead_of_and_replaced_with_name_what_was_left() -> None:
    assert (
        _label("Use the requests library for HTTP calls.", "Use httpx instead of requests for HTTP calls.")
        == Label.CONTRADICTING
    )
    assert (
        _label("We deploy with Helm.", "We replaced Helm with Kustomize for deploys.") == Label.CONTRADICTING
    )


def test_a_switch_that_both_texts_report_is_not_a_contradiction() -> None:
    assert (
        _label("We moved staging from Heroku to Fly.io.", "Staging moved from Heroku to Fly.io last spring.")
        != Label.CONTRADICTING
    )


def test_opposite_always_and_never_contradict() -> None:
    verdict = judge_pair("Never squash merge pull requests.", "Always squash merge pull requests.", 0.9)

    assert verdict.label == Label.CONTRADICTING
    assert "always" in verdict.reason
    assert "never" in verdict.reason


def test_other_opposite_words_contradict() -> None:
    assert (
        _label("Dark mode is enabled for admins.", "Dark mode is disabled for admins.") == Label.CONTRADICTING
    )
    assert _label("Prices are shown including VAT.", "Prices are shown excluding VAT.") == Label.CONTRADICTING
    assert _label("Feature branches are deleted after merge.", "Feature branches are kept after merge.") == (
        Label.CONTRADICTING
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("We use Redux for frontend state.", "We no longer use Redux for frontend state."),
        ("Remote work is allowed on Fridays.", "Remote work is not allowed on Fridays."),
        ("Migrations require a DBA review.", "Migrations don't require a DBA review."),
        ("We cache sessions in Redis.", "We don\u2019t cache sessions in Redis."),
        ("Dependabot PRs are merged automatically.", "Dependabot PRs are never merged automatically."),
    ],
)
def test_negation_asymmetry_contradicts(old: str, new: str) -> None:
    verdict = judge_pair(new, old, IN_BAND)

    assert verdict.label == Label.CONTRADICTING
    # "no longer use X" also says X was left behind, which is found first.
    assert "negates" in verdict.reason or "moved away" in verdict.reason


def test_two_negated_statements_agree() -> None:
    assert (
        _label("Never deploy on Fridays.", "Do not deploy to production on Fridays.") != Label.CONTRADICTING
    )


@pytest.mark.parametrize(
    ("old", "new", "values"),
    [
        ("We use Stripe for payments.", "We use Paddle for payments.", ("stripe", "paddle")),
        ("The Postgres port is 5432.", "The Postgres port is 6432.", ("5432", "6432")),
        ("Deploys happen on Fridays.", "Deploys happen on Mondays.", ("fridays", "mondays")),
        ("Standup starts at 9:30.", "Standup starts at 9:15.", ("9:30", "9:15")),
        ("Code reviews need two approvals.", "Code reviews need one approval.", ("two", "one")),
        ("Payouts to sellers happen weekly.", "Payouts to sellers happen daily.", ("weekly", "daily")),
        (
            "Alice is the on-call lead for payments.",
            "Bob is the on-call lead for payments.",
            ("alice", "bob"),
        ),
    ],
)
def test_a_different_value_for_the_same_subject_contradicts(
    old: str, new: str, values: tuple[str, str]
) -> None:
    verdict = judge_pair(new, old, IN_BAND)

    assert verdict.label == Label.CONTRADICTING
    assert f"'{values[0]}' -> '{values[1]}'" in verdict.reason


def test_a_number_on_one_side_only_is_a_different_quantity() -> None:
    assert (
        _label("Mobile releases go out every two weeks.", "Mobile releases go out every week.", 0.97)
        == Label.CONTRADICTING
    )


def test_the_same_value_written_as_a_word_or_digits_agrees() -> None:
    assert (
        _label(
            "Invoices are sent on the 1st of the month.", "We send invoices on the first day of every month."
        )
        != Label.CONTRADICTING
    )


def test_a_refinement_that_adds_to_the_same_subject_is_compatible() -> None:
    verdict = judge_pair(
        "Connect to Postgres on port 5432 through the VPN.", "The Postgres port is 5432.", 0.8
    )

    assert verdict.label == Label.COMPATIBLE
    assert set(verdict.subject) >= {"postgres", "port", "5432"}


def test_additions_with_their_own_words_are_not_read_as_a_new_value() -> None:
    # Both sides say words the other does not, but no two are values of one kind.
    assert _label("Deploys happen on Mondays.", "Monday deploys must finish before 3pm.") == Label.COMPATIBLE


def test_a_sentence_initial_capital_is_not_a_name_when_more_than_it_changed() -> None:
    assert (
        _label("Remote work is allowed on Fridays.", "Employees may work remotely on Fridays.", 0.88)
        != Label.CONTRADICTING
    )
    assert (
        _label("Questions about the data pipeline go to Kenji.", "Ask Kenji about the data pipeline.", 0.92)
        != Label.CONTRADICTING
    )


def test_an_ordinary_word_swapped_in_place_is_not_a_new_value() -> None:
    # Synonyms swap as often as values do; only values of a known kind count.
    assert (
        _label("Grafana is served on port 3000.", "Grafana listens on port 3000.", 0.89)
        != Label.CONTRADICTING
    )


def test_a_negation_of_the_same_sentence_about_another_thing_is_no_contradiction() -> None:
    assert (
        _label("We remove feature flags after rollout.", "We do not remove experiment flags after rollout.")
        != Label.CONTRADICTING
    )


def test_an_agreeing_pair_at_the_duplicate_threshold_is_a_duplicate() -> None:
    verdict = judge_pair(
        "Postgres listens on port 5432.", "The Postgres port is 5432.", DEFAULT_DUPLICATE_THRESHOLD
    )

    assert verdict.label == Label.DUPLICATE


def test_a_disagreeing_pair_above_the_duplicate_threshold_still_contradicts() -> None:
    # The bundled embedder puts these two at 0.98.
    assert _label("The Postgres port is 5432.", "The Postgres port is 6432.", 0.98) == Label.CONTRADICTING


def test_a_pair_below_the_band_is_unrelated_whatever_the_words() -> None:
    verdict = judge_pair("We use Paddle for payments.", "We use Stripe for payments.", BAND_FLOOR - 0.01)

    assert verdict.label == Label.UNRELATED
    assert "below the band" in verdict.reason


def test_a_pair_sharing_only_a_generic_verb_is_unrelated() -> None:
    verdict = judge_pair("We use Sentry for error tracking.", "We use Stripe for payments.", IN_BAND)

    assert verdict.label == Label.UNRELATED
    assert verdict.subject == ()


def test_the_default_duplicate_threshold_is_the_teams_default() -> None:
    assert Team._meta.get_field("dedup_threshold").default == DEFAULT_DUPLICATE_THRESHOLD


def test_a_warning_is_no_contradiction_of_the_runbook_it_guards() -> None:
    runbook = (
        "Step 1: run migration shard 1 and verify row counts. Step 2: run shards 2-8 one at a time. "
        "Step 3: re-enable the writers."
    )
    verdict = judge_pair("Do not run the migrations against prod without a backup.", runbook, IN_BAND)

    assert verdict.label == Label.COMPATIBLE
    assert "step list" in verdict.reason


@pytest.mark.parametrize(
    "runbook",
    [
        "How to restore:\n1. Download the dump\n2. pg_restore into a fresh database\n3. Point the app at it",
        "Restore checklist:\n- download the dump\n- pg_restore into a fresh database",
        "Restoring backups: 1. download the latest dump 2. pg_restore into a fresh database.",
    ],
)
def test_numbered_and_bulleted_lists_are_step_lists(runbook: str) -> None:
    assert _label(runbook, "Never pg_restore into the live database.") == Label.COMPATIBLE


def test_a_guarded_warning_does_not_negate_the_plain_statement() -> None:
    assert _label("We deploy on Fridays.", "Do not deploy on Fridays without the on-call lead.") != (
        Label.CONTRADICTING
    )


@pytest.mark.parametrize(
    ("rule", "exception"),
    [
        (
            "Never deploy on Fridays.",
            "Hotfixes may be deployed on Fridays with approval from the on-call lead.",
        ),
        (
            "No merges to main during the code freeze.",
            "Docs-only changes may still be merged during the code freeze.",
        ),
        ("Nobody is on call on Sunday nights.", "During launches someone is on call on Sunday nights too."),
    ],
)
def test_an_exception_to_a_rule_is_no_contradiction(rule: str, exception: str) -> None:
    assert _label(rule, exception) != Label.CONTRADICTING


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "ledger: owned by Identity, on-call Kenji, port 8080, deploys on Fridays.",
            "geo-lookup: owned by Search, on-call Kenji, port 8080, deploys on Thursdays.",
        ),
        (
            "Customer Acme is on the Team plan; renewal in March; main contact Priya.",
            "Customer Globex is on the Business plan; renewal in June; main contact Bob.",
        ),
        (
            "The perf database host is db-perf.internal and its pool size is 80.",
            "The qa database host is db-qa.internal and its pool size is 20.",
        ),
        (
            "Release 2.2.7 shipped on February 2 with faster search.",
            "Release 2.2.1 shipped on June 6 with faster search.",
        ),
        ("On-call week 12: primary Priya, secondary Bob.", "On-call week 13: primary Chen, secondary Marta."),
        ("Acme renews in March.", "Globex renews in March."),
    ],
)
def test_template_entries_about_different_subjects_never_contradict(old: str, new: str) -> None:
    verdict = judge_pair(new, old, 0.9)

    assert verdict.label != Label.CONTRADICTING, verdict.reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The design-system repository is public.", "The docs repository is private."),
        ("Staging deploys are automatic.", "Production deploys are manual."),
        ("We store page views in Redis.", "We do not store order totals in Redis."),
        ("The billing-api timeout is 30 seconds.", "The search-api timeout is 60 seconds."),
    ],
)
def test_opposites_negations_and_values_about_another_subject_never_contradict(old: str, new: str) -> None:
    assert _label(old, new) != Label.CONTRADICTING


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("We use Stripe for payments.", "We moved payments to Paddle.", "value"),
        ("Builds run on Jenkins.", "Jenkins was replaced by GitHub Actions for all builds.", "switch"),
        ("Okta is what we use for single sign-on.", "Okta was retired for single sign-on.", "switch"),
        ("Production runs Redis 6.2.", "Redis was bumped from 6.2 to 7.0 across the services.", "switch"),
        ("Deploys on Fridays are fine.", "No more deploys on Fridays.", "negation"),
        ("MFA is optional for contractors.", "MFA is required for contractors.", "opposite"),
    ],
)
def test_true_reversals_contradict_with_their_rules_confidence(old: str, new: str, rule: str) -> None:
    verdict = judge_pair(new, old, IN_BAND)

    assert verdict.label == Label.CONTRADICTING, verdict.reason
    assert (verdict.rule, verdict.confidence) == (rule, RULE_CONFIDENCE[rule])


def test_value_changes_and_switches_are_confident_enough_to_inject() -> None:
    assert RULE_CONFIDENCE["value"] >= INJECT_CONFIDENCE
    assert RULE_CONFIDENCE["switch"] >= INJECT_CONFIDENCE
    assert judge_pair("We use Sentry.", "We use Stripe for payments.", IN_BAND).confidence == 0.0


# --------------------------------------------------------------------------- band


def _unit_at(similarity: float) -> list[float]:
    """A unit vector whose cosine similarity to [1, 0, 0] is `similarity`."""
    return [similarity, math.sqrt(1 - similarity**2), 0.0]


NEW = [1.0, 0.0, 0.0]


def test_candidates_are_kept_in_the_band_closest_first() -> None:
    entries = [
        ("unrelated", _unit_at(0.2)),
        ("low", _unit_at(0.55)),
        ("duplicate", _unit_at(0.97)),
        ("high", _unit_at(0.85)),
        ("at threshold", _unit_at(DEFAULT_DUPLICATE_THRESHOLD)),
        ("at floor", _unit_at(BAND_FLOOR)),
    ]

    kept = select_candidates(NEW, entries)

    assert [key for key, _ in kept] == ["high", "low", "at floor"]
    assert kept[0][1] == pytest.approx(0.85)


def test_candidates_compare_by_cosine_whatever_the_vectors_length() -> None:
    ((key, similarity),) = select_candidates([3.0, 0.0, 0.0], [("scaled", [x * 7 for x in _unit_at(0.7)])])

    assert key == "scaled"
    assert similarity == pytest.approx(0.7)


def test_candidates_follow_the_teams_threshold_and_the_limit() -> None:
    entries = [(n, _unit_at(0.5 + n / 100)) for n in range(40)]

    kept = select_candidates(NEW, entries, duplicate_threshold=0.8, band_floor=0.6, limit=5)

    assert [key for key, _ in kept] == [29, 28, 27, 26, 25]


def test_candidates_skip_vectors_of_another_length_and_zero_vectors() -> None:
    entries = [("short", [0.7, 0.7]), ("zero", [0.0, 0.0, 0.0]), ("ok", _unit_at(0.6))]

    assert [key for key, _ in select_candidates(NEW, entries)] == ["ok"]
    assert select_candidates([0.0, 0.0, 0.0], entries) == []


# --------------------------------------------------------------------------- nudge


def test_the_nudge_is_phrased_as_the_seed_phrases_it() -> None:
    message = contradiction_message(old_text="we use Stripe", new_text="we use Paddle")

    assert message == "You previously recorded 'we use Stripe'. Update to 'we use Paddle'?"


def test_the_nudge_collapses_whitespace_and_drops_the_final_period() -> None:
    message = contradiction_message(old_text="We use\n  Stripe.", new_text="We use Paddle.")

    assert message == "You previously recorded 'We use Stripe'. Update to 'We use Paddle'?"


def test_the_nudge_cuts_long_texts() -> None:
    message = contradiction_message(old_text="old " * 20_000, new_text="new " * 20_000)

    quoted_old = message.split("'")[1]
    assert len(quoted_old) == MAX_QUOTE_CHARS
    assert quoted_old.endswith("…")
    assert len(message) <= 2 * MAX_QUOTE_CHARS + len("You previously recorded ''. Update to ''?")


# --------------------------------------------------------------------------- hostile input

SIZE = 64 * 1024
PATHOLOGICAL_FRAGMENTS = {
    "one long word": "a",
    "joined word": "a.",
    "colons": "9:",
    "apostrophes": "a'",
    "switch spam": "switched from ",
    "instead of spam": "instead of ",
    "negations": "not never ",
    "capitals": "Stripe Paddle ",
    "numbers": "5432 6432 ",
    "unicode": "\u00e9\u2019s ",
    "whitespace": " \n\t",
}


def _pathological(shape: str, size: int) -> str:
    fragment = PATHOLOGICAL_FRAGMENTS[shape]
    return fragment * (size // len(fragment))


def _judge_both_ways(text: str) -> Label:
    verdict = judge_pair(text, "We use Stripe for payments; the port is 5432.", IN_BAND)
    judge_pair("We use Stripe for payments.", text, IN_BAND)
    contradiction_message(old_text=text, new_text=text)
    return verdict.label


@pytest.mark.parametrize("shape", sorted(PATHOLOGICAL_FRAGMENTS))
def test_pathological_inputs_are_judged_in_linear_time(shape: str) -> None:
    assert isinstance(_judge_both_ways(_pathological(shape, SIZE)), Label)
    assert_linear_time(_judge_both_ways, lambda size: _pathological(shape, size), SIZE)


def test_only_the_opening_of_a_text_is_judged() -> None:
    old = "We use Stripe for payments."
    padded = "We use Stripe for payments. " + "x " * MAX_JUDGED_CHARS + "We do not use Stripe anymore."

    assert _label(old, padded) != Label.CONTRADICTING
    assert _label(old, "We do not use Stripe anymore. " + "x " * MAX_JUDGED_CHARS) == Label.CONTRADICTING


# --------------------------------------------------------------------------- labelled set


def test_the_labelled_set_has_enough_pairs_of_every_label() -> None:
    pairs = lp.load_pairs()
    counts = Counter(pair.label for pair in pairs)

    assert len(pairs) >= 100
    assert counts[Label.CONTRADICTING] >= 30
    assert counts[Label.COMPATIBLE] >= 30
    assert counts[Label.DUPLICATE] >= 20
    assert counts[Label.UNRELATED] >= 20
    assert len({(pair.old, pair.new) for pair in pairs}) == len(pairs)
    assert all(pair.old.strip() and pair.new.strip() and pair.old != pair.new for pair in pairs)


@pytest.fixture(scope="module")
def labelled_vectors() -> tuple[list[lp.Pair], dict[str, list[float]]]:
    pairs = lp.load_pairs()
    return pairs, lp.embed_pairs(pairs, lp.bundled_embedder())


@pytest.mark.parametrize("detector", [lp.judge_every_pair, lp.as_the_save_flow_sees_it])
def test_the_detector_meets_its_target_on_the_labelled_set(
    labelled_vectors: tuple[list[lp.Pair], dict[str, list[float]]], detector: lp.Detector
) -> None:
    pairs, vectors = labelled_vectors

    scored = lp.score(pairs, vectors, detector)

    mistakes = "\n".join(
        f"{p.label} -> {v.label}: {p.old!r} / {p.new!r} ({v.reason})" for p, v in scored.mistakes
    )
    assert scored.precision >= lp.TARGET_PRECISION, mistakes
    assert scored.recall >= lp.TARGET_RECALL, mistakes


# --------------------------------------------------------------------------- team memory set


def test_the_contradiction_set_is_split_whole_and_large_enough() -> None:
    pairs = cs.load_pairs()
    held_out = [p for p in pairs if p.split == cs.HELD_OUT]

    assert len(pairs) >= 300 and len({p.id for p in pairs}) == len(pairs)
    assert sum(p.contradicts for p in held_out) >= 60 and sum(not p.contradicts for p in held_out) >= 60
    families = {(p.family, p.split) for p in pairs if p.family != "hand_written"}
    assert len({family for family, _ in families}) == len(families), "a generated family is in one split"


def test_the_judge_meets_its_target_on_the_held_out_pairs() -> None:
    """The rules alone at each pair's real similarity with the bundled embedder (the save
    flow's figure, with intervals, is `make bench`'s contradictions section)."""
    pairs = cs.load_pairs(cs.HELD_OUT)
    texts = sorted({text for pair in pairs for text in (pair.old, pair.new)})
    vectors = dict(zip(texts, lp.bundled_embedder().embed_documents(texts), strict=True))
    flagged = {}
    for pair in pairs:
        similarity = sum(a * b for a, b in zip(vectors[pair.new], vectors[pair.old], strict=True))
        verdict = judge_pair(pair.new, pair.old, similarity)
        flagged[pair.id] = (verdict.label == Label.CONTRADICTING, verdict.reason)

    scored = cs.score(pairs, flagged)

    assert scored.precision >= cs.TARGET_PRECISION, scored.mistakes
    assert scored.recall >= cs.TARGET_RECALL, scored.mistakes
