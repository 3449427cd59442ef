"""What every embedding provider promises, and the one error search falls back on."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

# Provider kinds a profile may name.
PROVIDER_LOCAL = "local"
PROVIDER_NONE = "none"
PROVIDER_OPENAI = "openai"
PROVIDER_ANTHROPIC = "anthropic"
PROVIDER_KINDS = (PROVIDER_LOCAL, PROVIDER_NONE, PROVIDER_OPENAI, PROVIDER_ANTHROPIC)


class EmbeddingUnavailable(Exception):
    """No vectors right now: provider down, bad key, circuit open, timeout, no embeddings API.

    Search catches this and goes keyword-only with a warning; indexing leaves the memory
    pending for the reconcile job. Messages never contain credentials.
    """


@dataclass(frozen=True)
class Profile:
    """A named embedding configuration (built in, or from the profiles YAML file).

    Timeouts and waits are seconds. ``threads`` 0 means the deployment default; the
    ``model_*``/``tokenizer_path``/``max_seq_length`` fields only matter to local models.
    """

    name: str
    provider: str
    model: str = ""
    dimensions: int = 0
    base_url: str = ""
    api_key_env: str = ""
    send_dimensions: bool = False
    batch_size: int = 0
    connect_timeout: float = 2.0
    read_timeout: float = 10.0
    max_attempts: int = 3
    retry_wait: float = 0.5
    retry_wait_max: float = 4.0
    breaker_fail_max: int = 3
    breaker_reset_timeout: float = 60.0
    model_path: str = ""
    model_sha256: str = ""
    tokenizer_path: str = ""
    max_seq_length: int = 256
    threads: int = 0


class EmbeddingProvider(ABC):
    """Turns texts into L2-normalised vectors of ``dimensions`` floats.

    ``model`` identifies the vector space (model and dimensions): it keys the embedding
    cache and is stored with every vector, so changing it means re-embedding.
    Implementations are shared by all threads of a process.
    """

    profile: str
    model: str
    dimensions: int
    # Texts per call to the model or the endpoint; background indexing looks at other
    # teams' requests between batches (core.yield_to_requests).
    batch_size: int
    # Whether a call waits on a service elsewhere (its timeouts, retries, a dead endpoint),
    # so that a request steps out of its transaction meanwhile; a model in this process
    # answers in a few milliseconds of its own CPU, which a transaction may span.
    waits_on_network: bool = True

    @abstractmethod
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order. Raises EmbeddingUnavailable."""

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query. Raises EmbeddingUnavailable."""
        return self.embed_documents([text])[0]


def l2_normalised(vector: Sequence[float]) -> list[float]:
    """The unit vector of ``vector``; a zero or non-finite vector is unusable for cosine search."""
    norm = math.sqrt(math.fsum(value * value for value in vector))
    if norm == 0.0 or not math.isfinite(norm):
        raise EmbeddingUnavailable("the provider returned a zero or non-finite vector")
    return [value / norm for value in vector]
