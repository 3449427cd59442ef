"""The in-process ONNX provider: offline, 384-dimensional unit vectors that mean something."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search.embeddings.base import EmbeddingUnavailable, Profile
from search.embeddings.local import (
    DEFAULT_MODEL_ID,
    DEFAULT_MODEL_SHA256,
    LocalOnnxProvider,
    ModelIntegrityError,
    default_model_path,
)
from search.embeddings.profiles import provider_for, reset_providers

FRIDAY = "Never deploy to production on a Friday afternoon"
PARAPHRASE = "Avoid shipping releases at the end of the week"
UNRELATED = "The soup needs more salt and a pinch of pepper"


@pytest.fixture(autouse=True)
def _fresh_providers() -> Iterator[None]:
    reset_providers()
    yield
    reset_providers()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record, and refuse, every attempt to open a connection or resolve a name."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("network access in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return attempts


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _local_profile(**fields: Any) -> Profile:
    return Profile(name="local-test", provider="local", **fields)


def test_local_model_loads_and_embeds_without_the_network(no_network: list[Any]) -> None:
    provider = provider_for("local")
    assert isinstance(provider, LocalOnnxProvider)

    vector = provider.embed_query(FRIDAY)

    assert no_network == []
    assert provider.model == DEFAULT_MODEL_ID == "all-MiniLM-L6-v2-onnx-int8"
    assert provider.dimensions == len(vector) == 384
    assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-5)


def test_paraphrase_is_closer_than_an_unrelated_sentence() -> None:
    provider = LocalOnnxProvider(_local_profile())
    friday, paraphrase, unrelated = provider.embed_documents([FRIDAY, PARAPHRASE, UNRELATED])

    assert _cosine(friday, paraphrase) > _cosine(friday, unrelated) + 0.2
    assert _cosine(friday, friday) == pytest.approx(1.0, abs=1e-5)


def test_batch_results_equal_single_results() -> None:
    provider = LocalOnnxProvider(_local_profile(batch_size=4))
    texts = [FRIDAY, PARAPHRASE, UNRELATED, "x", "A much longer text about rollbacks. " * 40, "", "東京"]

    batched = provider.embed_documents(texts)
    singles = [provider.embed_query(text) for text in texts]

    assert len(batched) == len(texts)
    for together, alone in zip(batched, singles, strict=True):
        assert max(abs(a - b) for a, b in zip(together, alone, strict=True)) < 1e-5


def test_model_with_a_different_sha256_is_refused() -> None:
    provider = LocalOnnxProvider(_local_profile(model="other-model", model_sha256="0" * 64))

    with pytest.raises(ModelIntegrityError, match="sha256") as first:
        provider.embed_query(FRIDAY)
    assert isinstance(first.value, EmbeddingUnavailable)  # search falls back to keyword-only
    # The verdict is remembered rather than re-hashing the file on every search.
    with pytest.raises(ModelIntegrityError):
        provider.embed_documents([FRIDAY])


def test_custom_model_file_is_loaded_with_its_own_sha256(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    copy.write_bytes(default_model_path().read_bytes())
    provider = LocalOnnxProvider(
        _local_profile(
            model="minilm-copy", model_path=str(copy), model_sha256=DEFAULT_MODEL_SHA256, dimensions=384
        )
    )

    assert len(provider.embed_query(FRIDAY)) == 384
    assert provider.model == "minilm-copy"


def test_missing_model_file_is_unavailable(tmp_path: Path) -> None:
    provider = LocalOnnxProvider(
        _local_profile(model="gone", model_path=str(tmp_path / "absent.onnx"), model_sha256="1" * 64)
    )
    with pytest.raises(EmbeddingUnavailable, match="not found"):
        provider.embed_query(FRIDAY)


def test_profile_with_wrong_dimensions_is_unavailable() -> None:
    provider = LocalOnnxProvider(_local_profile(dimensions=768))
    with pytest.raises(EmbeddingUnavailable, match="384-dimensional"):
        provider.embed_query(FRIDAY)


def test_local_provider_is_shared_within_the_process() -> None:
    first = provider_for("local")
    assert provider_for("local") is first
    assert first is not None and first.embed_documents([]) == []
