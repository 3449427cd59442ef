"""Fault drills record what they measured (make drill prints it as a table and writes
bench-results/drill-faults.json); under `make test` nothing is written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RESULTS_VARIABLE = "MEMORYHUB_DRILL_RESULTS"
OUTAGE_VARIABLE = "MEMORYHUB_DRILL_OUTAGE_SECONDS"


def outage_seconds(default: float) -> float:
    """How long a drill keeps a component down: short in `make test`, longer in `make drill`."""
    return float(os.environ.get(OUTAGE_VARIABLE) or default)


def record(drill: str, **figures: Any) -> None:
    path = os.environ.get(RESULTS_VARIABLE)
    if not path:
        return
    results = Path(path)
    found = json.loads(results.read_text()) if results.exists() else {}
    found[drill] = figures
    results.write_text(json.dumps(found, indent=2, default=str) + "\n")
