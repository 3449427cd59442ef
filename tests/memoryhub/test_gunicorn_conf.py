"""The deployment's gunicorn hooks, called as gunicorn calls them."""

from __future__ import annotations

import gc

from memoryhub import gunicorn_conf


def test_a_worker_freezes_what_it_loaded_before_it_serves() -> None:
    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        gunicorn_conf.post_worker_init(worker=None)
        # Everything alive at that point is out of the collector's reach.
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
