-- MemoryHub's three database roles (docs/tenancy.md, "Database roles"), for a
-- PostgreSQL of your own. Run once, as a superuser, with psql:
--
--   psql -v owner_password=... -v app_password=... -v operator_password=... -f deploy/postgres-roles.sql
--
-- memoryhub_owner     owns the database and its tables; `manage.py migrate` logs in as it.
-- memoryhub_app       the web server, workers and beat log in as it (DATABASE_URL): it owns
--                     nothing, cannot bypass row-level security and is a member of no role,
--                     so no statement it runs can leave its team.
-- memoryhub_operator  BYPASSRLS, a login of its own (OPERATOR_DATABASE_URL): MemoryHub's
--                     audited operator paths (admin, beat jobs that span teams, maintenance
--                     commands, backup) run on a separate connection logged in as it.
-- Grants on the tables come with the migrations (teams.0008_roles, teams.0012).
--
-- Upgrading a server where memoryhub_operator had no login (memoryhub_app could SET ROLE to
-- it), as a superuser, before `manage.py migrate` with the new version (which refuses to run
-- until this is done):
--
--   ALTER ROLE memoryhub_operator LOGIN PASSWORD '...';
--   REVOKE memoryhub_operator FROM memoryhub_app;
--   GRANT memoryhub_app TO memoryhub_operator WITH INHERIT FALSE, SET TRUE;
--
-- then give the web server, workers and beat OPERATOR_DATABASE_URL.
\set ON_ERROR_STOP on

CREATE ROLE memoryhub_owner LOGIN PASSWORD :'owner_password' NOSUPERUSER NOBYPASSRLS NOCREATEROLE;
CREATE ROLE memoryhub_app LOGIN PASSWORD :'app_password' NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
CREATE ROLE memoryhub_operator LOGIN PASSWORD :'operator_password' NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE;
-- PostgreSQL 16+: membership without inheritance, SET ROLE only, and only towards less or
-- equal power. The owner may become the operator (it could switch row-level security off
-- anyway: its migrations' backfills and the restore read every team so); the operator may
-- narrow to the application role (a team's scope inside its transaction). Never grant
-- memoryhub_app any role.
GRANT memoryhub_operator TO memoryhub_owner WITH INHERIT FALSE, SET TRUE;
GRANT memoryhub_app TO memoryhub_operator WITH INHERIT FALSE, SET TRUE;

CREATE DATABASE memoryhub OWNER memoryhub_owner;
\connect memoryhub
-- pgvector is not a trusted extension: the superuser installs it.
CREATE EXTENSION IF NOT EXISTS vector;
