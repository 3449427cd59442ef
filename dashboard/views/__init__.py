"""Dashboard views, split by subdomain: pages (picker, overview, search, injection,
sessions), memories (browser, detail and its actions) and team_admin (vault, tokens,
members, audit log, shutdown)."""
