"""MemoryHub's benchmark suite: `python -m tests.bench [quality|latency|ingest|all] [--quick]`.

Not timed tests: a program that measures, prints tables and writes bench-results/*.json.
Everything runs against its own data folder (.memoryhub/bench), never the developer's.
This package imports nothing from Django at import time, so that pytest can collect
`test_scorer.py` and `__main__` can set the environment before `django.setup()`.
"""
