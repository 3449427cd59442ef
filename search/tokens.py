"""Offline token counting with the vendored all-MiniLM-L6-v2 WordPiece tokenizer.

Chunk sizes are measured in the embedding model's own tokens, so "400 tokens" means
the same thing to the chunker and to the model. The tokenizer file ships in
``search/assets`` (see the NOTICE there), so counting never touches the network.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tokenizers import Encoding, Tokenizer

VENDORED_TOKENIZER_PATH = Path(__file__).parent / "assets" / "all-MiniLM-L6-v2" / "tokenizer.json"

_counting_tokenizer: Tokenizer | None = None
_load_lock = threading.Lock()


def load_tokenizer(path: Path | str = VENDORED_TOKENIZER_PATH) -> Tokenizer:
    """A fresh tokenizer with the file's own truncation and padding turned off.

    The shipped tokenizer.json truncates and pads to 128 tokens; counting must see
    every token, and each caller configures its own copy because the settings are
    mutable state on the object.
    """
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _tokenizer() -> Tokenizer:
    global _counting_tokenizer
    if _counting_tokenizer is None:
        with _load_lock:
            if _counting_tokenizer is None:
                _counting_tokenizer = load_tokenizer()
    return _counting_tokenizer


def _encode(text: str) -> Encoding:
    # encode_batch, not encode: encode holds the GIL for its whole run,
    # stalling every other request thread of the process; encode_batch lets it go.
    return _tokenizer().encode_batch([text], add_special_tokens=False)[0]


def count_tokens(text: str) -> int:
    """Number of model tokens in ``text``, without the [CLS]/[SEP] specials."""
    if not text:
        return 0
    return len(_encode(text).ids)


def token_offsets(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets into ``text`` of each model token, in order."""
    if not text:
        return []
    return _encode(text).offsets
