"""Fixtures for tests that need a real Celery worker on the embedded Redis (filled in next)."""
