"""Token counting and chunking: pure functions, no database."""

from __future__ import annotations

import hashlib
import itertools
import random
import re
import threading
import time
from collections.abc import Callable

import pytest

from search.chunking import TextChunk, chunk_text
from search.tokens import count_tokens, token_offsets

WORDS = [
    *("memory", "agent", "deploy", "release", "friday", "postgres", "vector", "search", "index"),
    *("team", "lesson", "decision", "context", "rollback", "migration", "incident", "review"),
    *("schema", "cache", "worker", "queue", "token", "budget"),
]


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(6, 18)) for _ in range(sentences))


def _overlap(previous: TextChunk, following: TextChunk) -> str:
    """The longest start of ``following`` that is also the end of ``previous``."""
    for size in range(min(len(previous.text), len(following.text)), 0, -1):
        if previous.text.endswith(following.text[:size]):
            return following.text[:size]
    return ""


def test_count_tokens_counts_model_tokens_without_special_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Deploy on Friday.") == 4
    # WordPiece splits an unusual word into several pieces; none of [CLS]/[SEP] are counted.
    assert count_tokens("unbelievably") == len(token_offsets("unbelievably")) >= 1
    assert count_tokens("hello " * 1000) == 1000  # no 128-token truncation from the file


def test_token_offsets_point_into_the_text() -> None:
    text = "Déjà vu, 東京!"
    pieces = [text[start:end] for start, end in token_offsets(text)]
    assert pieces == ["Dé", "jà", "vu", ",", "東", "京", "!"]


def test_count_tokens_counts_every_token_of_64_kib() -> None:
    # How fast: `make bench` (section hardening, tokenizing).
    rng = random.Random(7)
    text = " ".join(rng.choice(WORDS) for _ in range(12_000))[: 64 * 1024]
    tokens = count_tokens(text)
    assert tokens == len(token_offsets(text)) > 9_000


def test_empty_or_whitespace_text_has_no_chunks() -> None:
    assert chunk_text("") == []
    assert chunk_text("  \n\n\t \r\n ") == []


def test_short_text_is_one_chunk_equal_to_the_stripped_text() -> None:
    text = "\n  Never deploy on a Friday.\n\nRoll back first, ask later.  \n"
    chunks = chunk_text(text)
    assert len(chunks) == 1
    chunk = chunks[0]
    assert chunk.index == 0
    assert chunk.text == text.strip()
    assert chunk.token_count == count_tokens(text.strip())
    assert chunk.content_hash == hashlib.sha256(text.strip().encode()).hexdigest()


def test_paragraphs_are_packed_whole_into_chunks_of_at_most_max_tokens() -> None:
    rng = random.Random(1)
    paragraphs = [_paragraph(rng, 3) for _ in range(14)]
    assert all(20 < count_tokens(p) < 80 for p in paragraphs)
    text = "\n\n".join(paragraphs[:7]) + "\r\n \r\n" + "\n\n\n".join(paragraphs[7:])

    chunks = chunk_text(text, max_tokens=200, overlap_tokens=40)

    assert 1 < len(chunks) < len(paragraphs)
    assert all(chunk.token_count <= 200 for chunk in chunks)
    assert any(chunk.text.count("\n\n") >= 1 for chunk in chunks)  # several paragraphs in one chunk
    for paragraph in paragraphs:
        assert any(paragraph in chunk.text for chunk in chunks), "a paragraph that fits is never split"


def test_consecutive_chunks_overlap_with_the_tail_of_the_previous_chunk() -> None:
    rng = random.Random(2)
    text = "\n\n".join(_paragraph(rng, 4) for _ in range(12))

    chunks = chunk_text(text, max_tokens=150, overlap_tokens=40)

    assert len(chunks) >= 4
    for previous, following in itertools.pairwise(chunks):
        carried = _overlap(previous, following)
        assert carried, f"chunk {following.index} does not start with the end of chunk {previous.index}"
        assert 0 < count_tokens(carried) <= 40
        assert carried[0].isupper(), "the overlap is made of whole sentences"


def test_paragraph_of_3000_tokens_is_split_at_sentence_boundaries() -> None:
    rng = random.Random(3)
    sentences = []
    while count_tokens(" ".join(sentences)) < 3000:
        sentences.append(_sentence(rng, rng.randint(5, 25)))
    paragraph = " ".join(sentences)

    chunks = chunk_text(paragraph, max_tokens=400, overlap_tokens=80)

    assert len(chunks) >= 8
    # Cuts fall between words here, so there is no tolerance: never more than max_tokens.
    assert max(chunk.token_count for chunk in chunks) <= 400
    assert min(chunk.token_count for chunk in chunks[:-1]) >= 400 - 80 - 40  # well packed
    for chunk in chunks:
        assert chunk.text[0].isupper() and chunk.text.endswith("."), "chunks start and end on sentences"
        assert chunk.text in paragraph
    for sentence in sentences:
        assert any(sentence in chunk.text for chunk in chunks)
    for previous, following in itertools.pairwise(chunks):
        assert 40 <= count_tokens(_overlap(previous, following)) <= 80


def test_giant_sentence_without_punctuation_is_split_between_words() -> None:
    rng = random.Random(4)
    sentence = " ".join(rng.choice(WORDS) for _ in range(1500))
    assert count_tokens(sentence) > 1200

    chunks = chunk_text(sentence, max_tokens=400, overlap_tokens=80)

    assert len(chunks) >= 4
    assert max(chunk.token_count for chunk in chunks) <= 400
    for chunk in chunks:
        assert set(chunk.text.split()) <= set(WORDS), "no word was cut in half"
        position = sentence.find(chunk.text)
        assert position >= 0
        assert position == 0 or sentence[position - 1] == " "
    for previous, following in itertools.pairwise(chunks):
        assert 40 <= count_tokens(_overlap(previous, following)) <= 80
    # Together the chunks cover the sentence from its first word to its last.
    assert chunks[0].text.startswith(sentence[:50]) and chunks[-1].text.endswith(sentence[-50:])


def test_punctuated_run_without_spaces_is_cut_at_punctuation() -> None:
    run = "-".join(f"{i:04d}" for i in range(300))  # ~600 tokens, no whitespace at all
    chunks = chunk_text(run, max_tokens=100, overlap_tokens=20)
    assert len(chunks) > 5
    assert all(chunk.token_count <= 100 for chunk in chunks)
    for chunk in chunks:
        assert re.fullmatch(r"-?\d{4}(-\d{4})*-?", chunk.text), "no number is cut in half"


def test_one_word_longer_than_max_tokens_is_cut_inside_the_word_as_a_last_resort() -> None:
    rng = random.Random(8)
    word = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(95))  # one word, many pieces
    assert count_tokens(word) > 30

    chunks = chunk_text(word, max_tokens=16, overlap_tokens=4)

    assert len(chunks) > 2
    # Documented tolerance: the tail of a cut word may re-tokenize a token or two longer.
    assert all(chunk.text and chunk.token_count <= 16 + 2 for chunk in chunks)
    assert all(chunk.text in word for chunk in chunks)
    assert word.startswith(chunks[0].text) and word.endswith(chunks[-1].text)


def test_chunks_carry_index_exact_token_count_and_sha256() -> None:
    rng = random.Random(5)
    text = "\n\n".join(_paragraph(rng, 5) for _ in range(8))

    chunks = chunk_text(text, max_tokens=120, overlap_tokens=30)

    assert [chunk.index for chunk in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text.strip() == chunk.text != ""
        assert chunk.token_count == count_tokens(chunk.text)
        assert chunk.content_hash == hashlib.sha256(chunk.text.encode("utf-8")).hexdigest()
        assert re.fullmatch(r"[0-9a-f]{64}", chunk.content_hash)


def test_chunking_is_deterministic() -> None:
    rng = random.Random(6)
    text = "\n\n".join(_paragraph(rng, 6) for _ in range(10))
    assert chunk_text(text, max_tokens=100, overlap_tokens=20) == chunk_text(
        text, max_tokens=100, overlap_tokens=20
    )


def test_abbreviations_and_decimals_do_not_end_a_sentence() -> None:
    sentence = "Use e.g. the staging cluster with 3.5 GiB of memory for the dry run"
    text = " ".join([f"{sentence} number {i}." for i in range(40)])

    # Without overlap every chunk starts where a sentence starts.
    chunks = chunk_text(text, max_tokens=60, overlap_tokens=0)

    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.text.startswith("Use e.g. the staging"), chunk.text[:40]


@pytest.mark.parametrize(("max_tokens", "overlap_tokens"), [(0, 0), (100, 100), (100, -1)])
def test_chunk_text_rejects_impossible_sizes(max_tokens: int, overlap_tokens: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("some text", max_tokens=max_tokens, overlap_tokens=overlap_tokens)


@pytest.mark.parametrize("tokenize", [count_tokens, token_offsets])
def test_tokenizing_a_long_text_lets_the_processes_other_threads_run(
    tokenize: Callable[[str], object],
) -> None:
    """A web process serves several requests with threads: tokenizing a 64 KiB save must
    not hold the GIL for its whole run. A second thread
    ticks all along; during a call that held the GIL it could not tick at all. Three
    tries, as the operating system may itself pause the ticking thread once."""
    text = "The billing service pages its owner and keeps its alert rules. " * 4000
    tokenize("warm up")

    def ticks_during_one_call() -> int:
        ticks: list[float] = []
        ticking, stop = threading.Event(), threading.Event()

        def tick() -> None:
            while not stop.is_set():
                ticks.append(time.perf_counter())
                ticking.set()

        ticker = threading.Thread(target=tick)
        ticker.start()
        assert ticking.wait(10)
        started = time.perf_counter()
        tokenize(text)
        ended = time.perf_counter()
        stop.set()
        ticker.join()
        middle = (started + (ended - started) / 4, ended - (ended - started) / 4)
        return sum(1 for moment in ticks if middle[0] < moment < middle[1])

    assert any(ticks_during_one_call() > 0 for _ in range(3))
