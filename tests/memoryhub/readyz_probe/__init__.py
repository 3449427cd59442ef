"""An app of one empty migration, installed only by tests.memoryhub.readyz_settings: the
code of a server that has a migration its database has not applied (test_readiness)."""
