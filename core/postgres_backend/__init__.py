"""Django's PostgreSQL backend, with the pool's check on lending made without a round
trip while the connection's socket is quiet (core.database_pool)."""
