"""Small typed helpers for reading settings from the environment."""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import environ
from cryptography.fernet import Fernet


class SettingError(RuntimeError):
    pass


def read_secret(env: environ.Env, name: str, *, generated_in: Path, fernet: bool = False) -> str:
    """Read a secret from NAME, else from the file named by NAME_FILE, else from a
    value generated once and kept (mode 0600) at `generated_in` for local installs."""
    value: str = env.str(name, default="")
    file_name: str = env.str(f"{name}_FILE", default="")
    if value and file_name:
        raise SettingError(f"set {name} or {name}_FILE, not both")
    if file_name:
        try:
            value = Path(file_name).read_text().strip()
        except OSError as exc:
            raise SettingError(f"{name}_FILE could not be read: {exc}") from exc
    if not value:
        value = _generated(generated_in, fernet=fernet)
    if fernet:
        try:
            for key in value.split(","):
                Fernet(key.strip().encode())
        except (ValueError, TypeError) as exc:
            raise SettingError(
                f"{name} must be one or more comma-separated Fernet keys (32 url-safe base64-encoded bytes)"
            ) from exc
    return value


# The files `read_secret` generated in this process: no other process has used their
# value yet, so a restore may replace them with the backup's keys (teams.backups).
generated_secret_files: set[Path] = set()


def _generated(path: Path, *, fernet: bool) -> str:
    value, made_now = kept_secret(path, make=Fernet.generate_key().decode if fernet else _random_secret)
    if made_now:
        generated_secret_files.add(path)
    return value


def _random_secret() -> str:
    return secrets.token_urlsafe(50)


def kept_secret(path: Path, *, make: Callable[[], str] = _random_secret) -> tuple[str, bool]:
    """The secret kept at `path` (mode 0600), made with `make` on first use; whether this
    call made it."""
    if path.exists():
        return path.read_text().strip(), False
    value = make()
    # O_EXCL: when two processes race, one writes and the other reads its value.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip(), False
    with os.fdopen(fd, "w") as handle:
        handle.write(value)
    return value, True


# A throttle rate's period in DRF's spelling (`600/min`), in seconds.
_RATE_PERIOD_SECONDS = {
    **dict.fromkeys(("s", "sec", "second"), 1),
    **dict.fromkeys(("m", "min", "minute"), 60),
    **dict.fromkeys(("h", "hour"), 3600),
    **dict.fromkeys(("d", "day"), 86400),
}


def rate_in_seconds(value: str) -> tuple[int, int] | None:
    """`600/min` as (600 requests, per 60 seconds); None when `value` is not a rate. A
    count of 0 lets nothing through (writes frozen, say)."""
    count, _, period = value.strip().partition("/")
    seconds = _RATE_PERIOD_SECONDS.get(period)
    if not (count.isdigit() and seconds):
        return None
    return int(count), seconds


def read_rate(env: environ.Env, name: str, *, default: str) -> str:
    """A throttle rate such as `600/min` (requests per second, minute, hour or day),
    checked at start-up: a typo would otherwise fail every API request."""
    value: str = env.str(name, default=default).strip()
    if rate_in_seconds(value) is None:
        raise SettingError(f"{name} must look like 600/min (a count per s, min, hour or day), not {value!r}")
    return value


def check_networks(name: str, values: list[str]) -> list[str]:
    """CIDR networks or single addresses, checked at start-up: a typo would otherwise
    surface only when a job first reads them."""
    for value in values:
        try:
            ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise SettingError(
                f"{name} lists networks such as 10.0.0.0/8 or 127.0.0.1, not {value!r}"
            ) from None
    return values


# Processes and threads past this many cores would hold more database connections than
# one embedded PostgreSQL (100) serves; past it, say the number explicitly.
MAX_DEFAULT_PROCESSES = 8


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and
    `taskset` narrow), else the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def default_processes(*, at_least: int = 1) -> int:
    """A process count that follows the machine: one per core, within [at_least, 8]."""
    return max(at_least, min(machine_cores(), MAX_DEFAULT_PROCESSES))


def metrics_enabled() -> bool:
    """Whether /metrics is on (MEMORYHUB_METRICS_TOKEN set). Only then do the processes
    keep their values in shared files: the files are memory-mapped, and a process that
    grows one on a full disk dies of SIGBUS (the disk-full drill's web server did)."""
    return bool(os.environ.get("MEMORYHUB_METRICS_TOKEN", "").strip())


def metrics_dir() -> Path:
    """Where the web and worker processes keep their Prometheus values (docs/operations.md,
    "Metrics"): MEMORYHUB_METRICS_DIR, else `metrics` in the data directory. Read from the
    environment, not settings: gunicorn's master needs it before Django is loaded."""
    explicit = os.environ.get("MEMORYHUB_METRICS_DIR", "")
    if explicit:
        return Path(explicit).resolve()
    default_data_dir = Path(__file__).resolve().parent.parent / ".memoryhub"  # as in settings
    return Path(os.environ.get("MEMORYHUB_DATA_DIR") or default_data_dir).resolve() / "metrics"


def reset_metrics_dir(folder: Path) -> None:
    """Empty (or make) one kind of process's metrics folder as that kind starts: values of
    processes of an earlier run must not be summed with this run's."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink(missing_ok=True)
