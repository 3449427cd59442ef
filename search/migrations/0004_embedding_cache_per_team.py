import django.db.models.deletion
from django.db import migrations, models

from teams.rls import enable_team_isolation


class Migration(migrations.Migration):
    """The embedding cache becomes per team (docs/indexing-and-workers.md, "The embedding
    cache, per team"). Its rows belong to no team and are only a cache, so they are dropped
    rather than guessed into teams: the next indexing of each text embeds it again."""

    dependencies = [("search", "0003_isolation_and_default_model_index"), ("teams", "0008_roles")]

    operations = [
        migrations.RunSQL("DELETE FROM search_embeddingcache", reverse_sql=migrations.RunSQL.noop),
        migrations.RemoveConstraint(model_name="embeddingcache", name="one_cached_embedding_per_model"),
        migrations.AddField(
            model_name="embeddingcache",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="teams.team"
            ),
            preserve_default=False,
        ),
        migrations.AddConstraint(
            model_name="embeddingcache",
            constraint=models.UniqueConstraint(
                fields=("team", "content_hash", "model"), name="one_cached_embedding_per_team_model"
            ),
        ),
        enable_team_isolation("search_embeddingcache"),
    ]
