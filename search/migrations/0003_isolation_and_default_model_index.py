from django.db import migrations

from search.vector_index import create_index_sql, drop_index_sql
from teams.rls import enable_team_isolation

# The embedded default model (search.embeddings.local); other models get their index
# from `manage.py reindex --model`.
DEFAULT_MODEL = "all-MiniLM-L6-v2-onnx-int8"
DEFAULT_DIMENSIONS = 384


class Migration(migrations.Migration):
    dependencies = [("search", "0002_chunks"), ("teams", "0002_row_level_security")]

    operations = [
        enable_team_isolation("search_chunk"),
        enable_team_isolation("search_chunkembedding"),
        migrations.RunSQL(
            create_index_sql(DEFAULT_MODEL, DEFAULT_DIMENSIONS), reverse_sql=drop_index_sql(DEFAULT_MODEL)
        ),
    ]
