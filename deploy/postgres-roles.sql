-- MemoryHub's three database roles (docs/decisions.md, "Database roles"), for a
-- PostgreSQL of your own. Run once, as a superuser, with psql:
--
--   psql -v owner_password=... -v app_password=... -f deploy/postgres-roles.sql
--
-- memoryhub_owner     owns the database and its tables; `manage.py migrate` logs in as it.
-- memoryhub_app       the web server, workers and beat log in as it: it owns nothing and
--                     cannot bypass row-level security.
-- memoryhub_operator  BYPASSRLS and no login: the application role may only SET ROLE to it,
--                     which MemoryHub does inside its audited operator scope (admin,
--                     maintenance commands, beat jobs that span teams).
-- Grants on the tables come with the migrations (teams.0008_roles).
\set ON_ERROR_STOP on

CREATE ROLE memoryhub_owner LOGIN PASSWORD :'owner_password' NOSUPERUSER NOBYPASSRLS NOCREATEROLE;
CREATE ROLE memoryhub_app LOGIN PASSWORD :'app_password' NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
CREATE ROLE memoryhub_operator NOLOGIN NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE;
-- PostgreSQL 16+: membership without inheritance, SET ROLE only. (BYPASSRLS is a role
-- attribute and is never inherited anyway; on PostgreSQL 15 use a plain GRANT.)
GRANT memoryhub_operator TO memoryhub_app WITH INHERIT FALSE, SET TRUE;
GRANT memoryhub_operator TO memoryhub_owner WITH INHERIT FALSE, SET TRUE;

CREATE DATABASE memoryhub OWNER memoryhub_owner;
\connect memoryhub
-- pgvector is not a trusted extension: the superuser installs it.
CREATE EXTENSION IF NOT EXISTS vector;
