"""Embedding providers behind one interface; pick one with ``provider_for(profile_name)``."""

from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable, Profile
from search.embeddings.profiles import get_profile, provider_for, reset_providers

__all__ = [
    "EmbeddingProvider",
    "EmbeddingUnavailable",
    "Profile",
    "get_profile",
    "provider_for",
    "reset_providers",
]
