"""Versions on the team's row that every process's caches check (docs/tenancy.md, "Token
cache"): `token_version` moves when a token of the team changes in a way authentication
reads (revoked, expiry, scopes, hash, team) or is deleted, `vault_version` on any change
of its vault entries. Triggers move them, so every path that writes (services, admin,
commands, raw SQL, a restore) does, in the writing transaction. A new version is the next
value of a sequence, never the old one plus one: a sequence does not roll back, so a
version seen inside a transaction that rolled back is never the version of another
state; and an UPDATE of the team's row never moves them back."""

from django.db import migrations, models

TRIGGERS = """
CREATE SEQUENCE teams_team_cache_version_seq;
CREATE FUNCTION memoryhub_bump_token_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE teams_team SET token_version = nextval('teams_team_cache_version_seq') WHERE id = OLD.team_id;
    IF TG_OP = 'UPDATE' AND NEW.team_id <> OLD.team_id THEN
        UPDATE teams_team SET token_version = nextval('teams_team_cache_version_seq') WHERE id = NEW.team_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER teams_agenttoken_bump_version
    AFTER UPDATE OF team_id, token_hash, scopes, revoked_at, expires_at OR DELETE ON teams_agenttoken
    FOR EACH ROW EXECUTE FUNCTION memoryhub_bump_token_version();

CREATE FUNCTION memoryhub_bump_vault_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE teams_team SET vault_version = nextval('teams_team_cache_version_seq') WHERE id = OLD.team_id;
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.team_id <> OLD.team_id) THEN
        UPDATE teams_team SET vault_version = nextval('teams_team_cache_version_seq') WHERE id = NEW.team_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER teams_vaultentry_bump_version
    AFTER INSERT OR UPDATE OR DELETE ON teams_vaultentry
    FOR EACH ROW EXECUTE FUNCTION memoryhub_bump_vault_version();

-- A save of a Team row read before a bump (the admin's form, any full save) writes the
-- versions it read: never back, or a revoked token's cached entry would match again.
CREATE FUNCTION memoryhub_keep_team_versions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.token_version := GREATEST(NEW.token_version, OLD.token_version);
    NEW.vault_version := GREATEST(NEW.vault_version, OLD.vault_version);
    RETURN NEW;
END $$;
CREATE TRIGGER teams_team_keep_versions
    BEFORE UPDATE ON teams_team
    FOR EACH ROW EXECUTE FUNCTION memoryhub_keep_team_versions();
"""

DROP_TRIGGERS = """
DROP TRIGGER teams_team_keep_versions ON teams_team;
DROP FUNCTION memoryhub_keep_team_versions();
DROP TRIGGER teams_vaultentry_bump_version ON teams_vaultentry;
DROP FUNCTION memoryhub_bump_vault_version();
DROP TRIGGER teams_agenttoken_bump_version ON teams_agenttoken;
DROP FUNCTION memoryhub_bump_token_version();
DROP SEQUENCE teams_team_cache_version_seq;
"""


class Migration(migrations.Migration):
    dependencies = [("teams", "0014_audit_fact_reveal")]

    operations = [
        migrations.AddField(
            model_name="team",
            name="token_version",
            field=models.BigIntegerField(db_default=0, default=0, editable=False),
        ),
        migrations.AddField(
            model_name="team",
            name="vault_version",
            field=models.BigIntegerField(db_default=0, default=0, editable=False),
        ),
        migrations.RunSQL(TRIGGERS, reverse_sql=DROP_TRIGGERS),
    ]
