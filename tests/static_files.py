"""WhiteNoise for the test process: Django's test client loads the middleware anew for
every client, and WhiteNoise scans every app's static files each time (about 90 ms,
nearly a third of a dashboard test's time). Here the scan runs once per process; each instance still
serves what the service would serve."""

from __future__ import annotations

from typing import Any, ClassVar

from whitenoise.middleware import WhiteNoiseMiddleware


class WhiteNoiseScannedOnce(WhiteNoiseMiddleware):  # type: ignore[misc]
    _found: ClassVar[dict[str, Any] | None] = None

    def add_files_from_finders(self) -> None:
        found = WhiteNoiseScannedOnce._found
        if found is None:
            before = dict(self.files)
            super().add_files_from_finders()
            found = {url: file for url, file in self.files.items() if before.get(url) is not file}
            WhiteNoiseScannedOnce._found = found
        self.files.update(found)
