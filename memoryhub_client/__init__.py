"""The `memoryhub` command: a client of a MemoryHub server, over HTTP only.

Nothing here imports Django or the server's apps: it runs where an agent runs, with no
database and no settings (docs/agents.md, "The client command")."""
