"""gunicorn's settings wherever MemoryHub's web server runs (`make run`'s Procfile, the
Dockerfile, the bench): `gunicorn memoryhub.wsgi -c python:memoryhub.gunicorn_conf`.

Threaded workers, so one team's slow request (a 64 KiB save being scrubbed and checked
for duplicates) holds one thread, not a whole process: the other threads go on serving
other teams (docs/decisions.md, "Web server"). WEB_CONCURRENCY is gunicorn's own
variable for the number of processes; by default one per core (at least 2, at most 8)."""

import os

from core.settings_env import default_processes

workers = int(os.environ.get("WEB_CONCURRENCY") or default_processes(at_least=2))
worker_class = "gthread"
threads = int(os.environ.get("MEMORYHUB_WEB_THREADS", "4"))
accesslog = "-"
