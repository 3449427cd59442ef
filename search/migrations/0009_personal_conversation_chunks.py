import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from teams.rls import enable_personal_writer_rows


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0008_fact_search_columns"),
        ("memories", "0020_personal_conversations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="conversationchunk",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        enable_personal_writer_rows(
            "search_conversationchunk", owner_from="memoryhub_owner_from_conversation"
        ),
    ]
