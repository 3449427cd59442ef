"""The check the connection pool runs on a connection as it lends it (docs/operations.md,
"Why a pool").

psycopg_pool's own check sends an empty query: one round trip more on every request,
about a sixth of a read's. A connection that a restart, a crash or
pg_terminate_backend ended has its socket readable (the server's goodbye, or the end of
the stream) before anyone asks; a healthy idle one has nothing to read. So the round trip
is made only when the socket has something to say, and a connection psycopg already
knows is broken is refused at once. What this cannot see is a peer that vanished
without a word (a cut network between hosts): that request fails (503) and the pool
drops the connection as it comes back.
"""

from __future__ import annotations

import select

import psycopg
from psycopg import pq
from psycopg_pool import ConnectionPool


def check_lent_connection(connection: psycopg.Connection) -> None:
    """Return quietly for a usable connection; raise psycopg.OperationalError (the pool
    then opens another) for one that is not."""
    if connection.broken or connection.pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError("the connection is broken")
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    if poller.poll(0):
        # Unasked-for bytes: most likely the server saying goodbye. The round trip
        # decides (and reads a harmless notice or parameter change on the way).
        ConnectionPool.check_connection(connection)
