"""Metadata extraction without an LLM: a pure function, tested on the text it meets."""

from __future__ import annotations

import pytest
from django.db.models import Q

from memories.metadata_extraction import (
    MAX_ACTION_ITEM_CHARS,
    MAX_TAGS,
    extract_metadata,
    metadata_filter_document,
    metadata_filter_q,
    parse_filter_param,
    with_extracted_metadata,
)
from tests.linear_time import assert_linear_time


def people(text: str) -> list[str]:
    return extract_metadata(text)["people"]


def tags(text: str) -> list[str]:
    return extract_metadata(text)["tags"]


def actions(text: str) -> list[str]:
    return extract_metadata(text)["action_items"]


def test_plain_text_yields_every_key_empty() -> None:
    assert extract_metadata("The staging database is db-3.") == {
        "people": [],
        "tags": [],
        "topics": [],
        "action_items": [],
    }


def test_empty_text_yields_every_key_empty() -> None:
    assert extract_metadata("") == {"people": [], "tags": [], "topics": [], "action_items": []}


# --- people -------------------------------------------------------------------


def test_mentions_are_lowercased_deduplicated_and_kept_in_order() -> None:
    assert people("@Carol asked @alice; @bob agreed with @ALICE and @carol.") == ["carol", "alice", "bob"]


def test_mentions_keep_dots_and_dashes_inside_but_not_at_the_end() -> None:
    assert people("Thanks @john.doe and @mary-ann.") == ["john.doe", "mary-ann"]


def test_mentions_after_brackets_and_quotes_count() -> None:
    assert people('(@alice) [@bob] "@carol", @dave') == ["alice", "bob", "carol", "dave"]


@pytest.mark.parametrize(
    "text",
    [
        "mail bob@example.com today",
        "see https://github.com/@alice/repo",
        "meet @3pm",
        "install @types/node",
        "use `@property` here",
        "```\n@decorator\ndef f(): ...\n```",
        "a lone @ sign",
    ],
)
def test_emails_urls_times_packages_and_code_are_not_people(text: str) -> None:
    assert people(text) == []


def test_unicode_names_are_people() -> None:
    assert people("merci @José") == ["josé"]


# --- tags ---------------------------------------------------------------------


def test_hashtags_are_lowercased_deduplicated_and_kept_in_order() -> None:
    assert tags("#Deploy on #friday broke #deploy again #infra") == ["deploy", "friday", "infra"]


def test_hashtags_keep_dashes_underscores_and_slashes() -> None:
    assert tags("#deploy-friday #ci_cd #ci/cd.") == ["deploy-friday", "ci_cd", "ci/cd"]


@pytest.mark.parametrize(
    "text",
    [
        "# Deploy notes",
        "## Second level heading",
        "issue #123 and #42",
        "written in C# and F#",
        "quote &#39; entity",
        "see https://example.com/page#section",
        "see docs/page.md#setup",
        "jump to [setup](#setup)",
        "www.example.com/#anchor",
        "colour #fff and #FFFFFF",
        "colour #1e90ff and #f00 and #ababab",
        "the `#include` line",
        "```c\n#include <stdio.h>\n#define X 1\n```",
        "##double",
    ],
)
def test_headings_issue_numbers_entities_urls_colours_and_code_are_not_tags(text: str) -> None:
    assert tags(text) == []


def test_hex_looking_words_stay_tags() -> None:
    assert tags("#cafe #feed #decade #bad") == ["cafe", "feed", "decade", "bad"]


def test_a_tag_at_the_start_of_a_line_without_a_space_is_a_tag_not_a_heading() -> None:
    assert tags("#postmortem\nThe outage lasted an hour.") == ["postmortem"]


def test_tags_after_brackets_count_and_text_after_code_is_still_read() -> None:
    assert tags("```\n#notatag\n```\n(#infra) and #db") == ["infra", "db"]


def test_tags_are_capped() -> None:
    found = tags(" ".join(f"#tag{i}x" for i in range(MAX_TAGS + 10)))

    assert len(found) == MAX_TAGS and found[0] == "tag0x"


# --- action items ---------------------------------------------------------------


def test_sentences_with_action_words_are_action_items_in_order() -> None:
    text = (
        "The deploy failed. We need to pin the driver. Bob must review it! "
        "Follow up with ops tomorrow? Nothing else happened."
    )

    assert actions(text) == [
        "We need to pin the driver.",
        "Bob must review it!",
        "Follow up with ops tomorrow?",
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "TODO: rotate the keys",
        "todo rotate the keys",
        "She needs to rotate the keys",
        "A follow-up on the keys",
        "Schedule a followup",
        "Two follow ups remain",
        "We MUST rotate the keys",
    ],
)
def test_action_words_match_in_any_case_and_form(sentence: str) -> None:
    assert actions(sentence) == [sentence]


@pytest.mark.parametrize(
    "sentence",
    [
        "Mustard is on the menu",
        "No need for that",
        "The needle to the right",
        "Followers went up",
        "The todolist app shipped",
    ],
)
def test_words_that_only_contain_action_words_are_not_action_items(sentence: str) -> None:
    assert actions(sentence) == []


def test_list_items_and_checkboxes_are_one_item_each_without_their_markers() -> None:
    text = "Plan:\n- [ ] need to  update\tthe docs\n* TODO write tests\n1. must ship\n- done already"

    assert actions(text) == ["need to update the docs", "TODO write tests", "must ship"]


def test_urls_and_version_numbers_do_not_split_sentences() -> None:
    text = "We need to upgrade to 3.11.2 per https://docs.example.com/a.b.c today. Fine."

    assert actions(text) == ["We need to upgrade to 3.11.2 per https://docs.example.com/a.b.c today."]


def test_action_items_are_deduplicated_and_shortened() -> None:
    long = "We need to " + "really " * 100 + "fix it."

    found = actions(f"TODO fix it.\nTODO fix it.\n{long}")

    assert found[0] == "TODO fix it." and len(found) == 2
    assert len(found[1]) == MAX_ACTION_ITEM_CHARS and found[1].endswith("…")


def test_todos_inside_code_blocks_are_code_not_action_items() -> None:
    assert actions("```python\n# TODO: handle errors\n```\nAll good.") == []


def test_a_mixed_memory() -> None:
    text = (
        "# Retro\n"
        "@Alice found the #flaky-test in #ci. See https://ci.example.com/run#42.\n"
        "We need to quarantine it; @bob must follow up with @alice.\n"
        "Colour of the badge: #ff0000."
    )

    assert extract_metadata(text) == {
        "people": ["alice", "bob"],
        "tags": ["flaky-test", "ci"],
        "topics": ["retro"],
        "action_items": ["We need to quarantine it; @bob must follow up with @alice."],
    }


# --- merging into metadata ---------------------------------------------------------


def test_extracted_keys_fill_what_the_caller_left_out_and_are_recorded() -> None:
    merged = with_extracted_metadata("@bob #deploy need to ship", {"source": "cli"})

    assert merged == {
        "source": "cli",
        "people": ["bob"],
        "tags": ["deploy"],
        "action_items": ["@bob #deploy need to ship"],
        "extracted": ["people", "tags", "action_items"],
    }


def test_caller_keys_win_even_when_empty() -> None:
    merged = with_extracted_metadata("@bob #deploy", {"tags": ["release"], "people": []})

    assert merged == {"tags": ["release"], "people": []}


def test_nothing_found_adds_nothing() -> None:
    assert with_extracted_metadata("plain words", None) == {}
    assert with_extracted_metadata("plain words", {"a": 1}) == {"a": 1}


def test_previously_extracted_keys_are_recomputed_from_the_new_text() -> None:
    old = with_extracted_metadata("#old @carol", {"source": "cli", "tags": ["pinned"]})
    assert old["extracted"] == ["people"]

    new = with_extracted_metadata("#new text", old)

    # The caller's own tags stay; carol came from the old text and goes with it.
    assert new == {"source": "cli", "tags": ["pinned"]}
    assert with_extracted_metadata("#new @dave", {"source": "cli", "tags": ["x"], "extracted": ["tags"]}) == {
        "source": "cli",
        "tags": ["new"],
        "people": ["dave"],
        "extracted": ["people", "tags"],
    }


def test_the_input_metadata_is_not_modified() -> None:
    metadata = {"tags": ["a"], "extracted": ["tags"]}

    with_extracted_metadata("#b", metadata)

    assert metadata == {"tags": ["a"], "extracted": ["tags"]}


# --- filters ----------------------------------------------------------------------


def test_filter_values_are_normalised_like_extracted_ones() -> None:
    assert parse_filter_param("#Deploy, infra,,deploy ,@x") == ["deploy", "infra", "x"]
    assert parse_filter_param(None) == [] and parse_filter_param(" , ") == []


def test_filter_document_requires_every_tag_and_person() -> None:
    assert metadata_filter_document(["Deploy", "#ci"], ["@Bob"]) == {
        "tags": ["deploy", "ci"],
        "people": ["bob"],
    }
    assert metadata_filter_document(["deploy"], None) == {"tags": ["deploy"]}
    assert metadata_filter_document([], [" "]) is None


def test_filter_q_is_one_containment_or_nothing() -> None:
    assert metadata_filter_q(["deploy"], ["bob"]) == Q(
        metadata__contains={"tags": ["deploy"], "people": ["bob"]}
    )
    assert metadata_filter_q(None, None) == Q()


@pytest.mark.django_db
def test_filter_q_selects_memories_by_tag_and_person(team: object) -> None:
    from memories.models import Memory
    from tests.conftest import operator_view
    from tests.factories import MemoryFactory

    MemoryFactory(team=team, key="both", metadata=with_extracted_metadata("#deploy with @bob", None))
    MemoryFactory(team=team, key="tag-only", metadata=with_extracted_metadata("#deploy alone", None))
    MemoryFactory(team=team, key="caller", metadata={"tags": ["deploy", "db"], "people": ["bob"]})
    MemoryFactory(team=team, key="none", metadata={})

    with operator_view():
        rows = Memory.objects.filter(team=team)
        by_tag = set(rows.filter(metadata_filter_q(["#Deploy"], None)).values_list("key", flat=True))
        by_both = set(rows.filter(metadata_filter_q(["deploy"], ["Bob"])).values_list("key", flat=True))
        unfiltered = rows.filter(metadata_filter_q([], [])).count()

    assert by_tag == {"both", "tag-only", "caller"}
    assert by_both == {"both", "caller"}
    assert unfiltered == 4


SIZE = 64 * 1024
PATHOLOGICAL_FRAGMENTS = {
    "a.": "a.",
    "a@": "a@",
    "://": "://",
    "a:": "a:",
    "base64": "QUJD",
    "eyJ-": "eyJ-",
    "sk-": "sk-",
    "](": "](",
    '](x "': '](x "',
    "backticks": "`",
    "backtick a": "``a",
    "fences": "```\n~~~\n",
    " @a.": " @a.",
    " #a/": " #a/",
    "need ": "need ",
    ". ": ". ",
    "unicode": "é.",
}


def _pathological(shape: str, size: int) -> str:
    fragment = PATHOLOGICAL_FRAGMENTS[shape]
    return fragment * (size // len(fragment))


@pytest.mark.parametrize("shape", sorted(PATHOLOGICAL_FRAGMENTS))
def test_pathological_inputs_are_extracted_in_linear_time(shape: str) -> None:
    assert set(extract_metadata(_pathological(shape, SIZE))) == {"people", "tags", "topics", "action_items"}
    # Quadratic backtracking took 24 s on 64 KiB here.
    assert_linear_time(extract_metadata, lambda size: _pathological(shape, size), SIZE)


def test_emails_and_urls_are_still_not_people_or_tags_in_unicode_text() -> None:
    found = extract_metadata(
        "Écrire à josé@exemple.fr ou voir https://exemple.fr/#ancre, merci @zoé #déploiement"
    )

    assert found["people"] == ["zoé"]
    assert found["tags"] == ["déploiement"]
