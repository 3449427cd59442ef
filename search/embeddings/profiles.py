"""Named embedding profiles: built-in defaults, overridden or extended by a YAML file.

A deployment picks its default with the ``MEMORYHUB_EMBEDDING_PROFILE`` setting; a team
may name another (``Team.embedding_profile``, blank for the default). The file named by
``MEMORYHUB_EMBEDDING_PROFILES_FILE`` looks like::

    profiles:
      openai:                 # overrides fields of the built-in profile
        dimensions: 512
        send_dimensions: true
      vllm:                   # a new profile
        provider: openai
        base_url: http://vllm:8000/v1
        api_key_env: VLLM_API_KEY
        model: BAAI/bge-small-en-v1.5
        dimensions: 384
        batch_size: 32
        timeout: {connect: 1, read: 5}   # or a number: the read timeout

Providers are built once per profile name per process and reused, so their connection
pools and circuit breakers persist between requests.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from search.embeddings.base import (
    PROVIDER_ANTHROPIC,
    PROVIDER_KINDS,
    PROVIDER_LOCAL,
    PROVIDER_NONE,
    PROVIDER_OPENAI,
    EmbeddingProvider,
    EmbeddingUnavailable,
    Profile,
)
from search.embeddings.local import (
    DEFAULT_DIMENSIONS,
    DEFAULT_MODEL_ID,
    DEFAULT_MODEL_SHA256,
    DEFAULT_THREADS,
    LocalOnnxProvider,
    unload_models,
)
from search.embeddings.openai_compat import OpenAICompatibleProvider

DEFAULT_PROFILE_NAME = "local"
_PROFILE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

_INT_FIELDS = ("dimensions", "batch_size", "max_attempts", "breaker_fail_max", "max_seq_length", "threads")
_FLOAT_FIELDS = ("retry_wait", "retry_wait_max", "breaker_reset_timeout")
_STR_FIELDS = ("provider", "model", "base_url", "api_key_env", "model_path", "model_sha256", "tokenizer_path")
_ALLOWED_KEYS = {*_INT_FIELDS, *_FLOAT_FIELDS, *_STR_FIELDS, "send_dimensions", "timeout"}

_profiles_cache: dict[tuple[str, int, int, str], dict[str, Profile]] = {}


class ProfileConfigError(ImproperlyConfigured):
    """The profiles file or a profile in it is invalid."""


class UnknownProfile(ProfileConfigError):
    """No built-in or configured profile has this name."""


def builtin_profiles() -> dict[str, Profile]:
    return {
        "local": Profile(
            name="local",
            provider=PROVIDER_LOCAL,
            model=DEFAULT_MODEL_ID,
            dimensions=DEFAULT_DIMENSIONS,
            model_sha256=DEFAULT_MODEL_SHA256,
        ),
        "none": Profile(name="none", provider=PROVIDER_NONE),
        "openai": Profile(
            name="openai",
            provider=PROVIDER_OPENAI,
            base_url=os.environ.get("OPENAI_BASE_URL", "") or "https://api.openai.com/v1",
            api_key_env="OPENAI_API_KEY",
            model="text-embedding-3-small",
            dimensions=1536,
            send_dimensions=True,
        ),
        "ollama": Profile(
            name="ollama",
            provider=PROVIDER_OPENAI,
            base_url="http://127.0.0.1:11434/v1",
            model="nomic-embed-text",
            dimensions=768,
        ),
        "anthropic": Profile(name="anthropic", provider=PROVIDER_ANTHROPIC),
    }


def default_profile_name() -> str:
    return getattr(settings, "MEMORYHUB_EMBEDDING_PROFILE", "") or DEFAULT_PROFILE_NAME


def load_profiles() -> dict[str, Profile]:
    """Every profile: built-ins merged with the profiles file. Raises ProfileConfigError.

    Parsed once and reused until the settings, the file's mtime or OPENAI_BASE_URL change,
    since this runs on every search.
    """
    path_setting = str(getattr(settings, "MEMORYHUB_EMBEDDING_PROFILES_FILE", "") or "")
    default_threads = int(getattr(settings, "MEMORYHUB_EMBEDDING_THREADS", DEFAULT_THREADS))
    cache_key = (path_setting, _mtime(path_setting), default_threads, os.environ.get("OPENAI_BASE_URL", ""))
    cached = _profiles_cache.get(cache_key)
    if cached is not None:
        return cached
    profiles = builtin_profiles()
    if path_setting:
        for name, options in _read_profiles_file(Path(path_setting)).items():
            profiles[name] = _build_profile(name, options, base=profiles.get(name))
    resolved = {
        name: profile if profile.threads else dataclasses.replace(profile, threads=default_threads)
        for name, profile in profiles.items()
    }
    _profiles_cache.clear()
    _profiles_cache[cache_key] = resolved
    return resolved


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns if path else 0
    except OSError:
        return -1  # reported properly when the file is read


def get_profile(name: str | None = None) -> Profile:
    """The named profile, or the deployment default for None or blank.

    Raises UnknownProfile, or ProfileConfigError when the profiles file is invalid.
    """
    resolved = name or default_profile_name()
    profiles = load_profiles()
    if resolved not in profiles:
        raise UnknownProfile(f"unknown embedding profile {resolved!r}; known: {', '.join(sorted(profiles))}")
    return profiles[resolved]


_providers: dict[str, tuple[Profile, EmbeddingProvider]] = {}
_providers_lock = threading.Lock()


def provider_for(profile_name: str | None = None) -> EmbeddingProvider | None:
    """The provider of a profile (None or blank: the deployment default), shared per process.

    Returns None for a profile without embeddings (provider ``none``). Raises
    EmbeddingUnavailable when embeddings are configured but cannot be had: a provider
    without an embeddings API (anthropic), a missing API key, an unknown profile or an
    invalid profiles file; search then goes keyword-only and logs why.
    """
    try:
        profile = get_profile(profile_name)
    except ProfileConfigError as exc:
        raise EmbeddingUnavailable(str(exc)) from exc
    if profile.provider == PROVIDER_NONE:
        return None
    if profile.provider == PROVIDER_ANTHROPIC:
        raise EmbeddingUnavailable("anthropic has no embeddings endpoint")
    with _providers_lock:
        cached = _providers.get(profile.name)
        # A changed profile (settings or file edited) gets a fresh provider.
        if cached is not None and cached[0] == profile:
            return cached[1]
        provider = _make_provider(profile)
        _providers[profile.name] = (profile, provider)
        return provider


def reset_providers() -> None:
    """Forget every provider, with its breaker state and loaded model (for tests)."""
    with _providers_lock:
        _providers.clear()
        _profiles_cache.clear()
    unload_models()


def _make_provider(profile: Profile) -> EmbeddingProvider:
    if profile.provider == PROVIDER_LOCAL:
        return LocalOnnxProvider(profile)
    return OpenAICompatibleProvider(profile)


def _read_profiles_file(path: Path) -> dict[str, dict[str, Any]]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileConfigError(f"cannot read embedding profiles file {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ProfileConfigError(f"embedding profiles file {path} is not valid YAML: {exc}") from exc
    if document is None:
        return {}
    if (
        not isinstance(document, dict)
        or set(document) != {"profiles"}
        or not isinstance(document["profiles"], dict)
    ):
        raise ProfileConfigError(f"{path}: expected a mapping with one key, 'profiles: {{name: {{...}}}}'")
    for name, options in document["profiles"].items():
        if not isinstance(name, str) or not _PROFILE_NAME.match(name):
            raise ProfileConfigError(
                f"{path}: invalid profile name {name!r} (lowercase letters, digits, -_.)"
            )
        if not isinstance(options, dict):
            raise ProfileConfigError(f"{path}: profile {name!r} must be a mapping of options")
    return document["profiles"]


def _build_profile(name: str, options: dict[str, Any], *, base: Profile | None) -> Profile:
    """Validate one profile's options, layered over the built-in of that name if there is one."""

    def fail(message: str) -> ProfileConfigError:
        return ProfileConfigError(f"embedding profile {name!r}: {message}")

    unknown = set(options) - _ALLOWED_KEYS
    if unknown:
        raise fail(f"unknown option(s) {', '.join(sorted(map(str, unknown)))}")
    provider = options.get("provider", base.provider if base else None)
    if provider not in PROVIDER_KINDS:
        raise fail(f"provider must be one of {', '.join(PROVIDER_KINDS)}, not {provider!r}")
    # Overriding a built-in keeps its fields unless the provider kind changes.
    start = base if base is not None and base.provider == provider else Profile(name=name, provider=provider)
    fields: dict[str, Any] = {}
    for key, value in options.items():
        if key in _INT_FIELDS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise fail(f"{key} must be a non-negative integer, not {value!r}")
        elif key in _FLOAT_FIELDS:
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise fail(f"{key} must be a non-negative number, not {value!r}")
            value = float(value)
        elif key in _STR_FIELDS:
            if not isinstance(value, str):
                raise fail(f"{key} must be a string, not {value!r}")
        elif key == "send_dimensions":
            if not isinstance(value, bool):
                raise fail(f"send_dimensions must be true or false, not {value!r}")
        elif key == "timeout":
            fields.update(_timeouts(value, fail))
            continue
        fields[key] = value
    profile = dataclasses.replace(start, **fields)
    _check_complete(profile, fail)
    return profile


def _timeouts(value: Any, fail: Any) -> dict[str, float]:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return {"read_timeout": float(value)}
    if isinstance(value, dict) and value and set(value) <= {"connect", "read"}:
        timeouts = {}
        for key, seconds in value.items():
            if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
                raise fail(f"timeout.{key} must be a positive number of seconds")
            timeouts[f"{key}_timeout"] = float(seconds)
        return timeouts
    raise fail("timeout must be a number of seconds or {connect: s, read: s}")


def _check_complete(profile: Profile, fail: Any) -> None:
    if profile.provider == PROVIDER_OPENAI:
        if not profile.base_url.startswith(("http://", "https://")):
            raise fail("base_url must start with http:// or https://")
        if not profile.model or profile.dimensions <= 0:
            raise fail("model and dimensions are required")
        if profile.max_attempts < 1 or profile.breaker_fail_max < 1:
            raise fail("max_attempts and breaker_fail_max must be at least 1")
    if profile.provider == PROVIDER_LOCAL:
        sha256 = profile.model_sha256.lower() or DEFAULT_MODEL_SHA256
        if profile.model_path and not profile.model_sha256:
            raise fail("model_path needs model_sha256, so a swapped file is never loaded")
        if profile.model_sha256 and not _SHA256.match(sha256):
            raise fail("model_sha256 must be 64 hex digits")
        # Vectors are cached by model id: another file must not reuse the default model's id.
        if sha256 != DEFAULT_MODEL_SHA256 and profile.model in ("", DEFAULT_MODEL_ID):
            raise fail(
                f"a model other than the built-in one needs its own model id, not {DEFAULT_MODEL_ID!r}"
            )
        if profile.model_path and not profile.dimensions:
            raise fail("dimensions are required for a custom model")
