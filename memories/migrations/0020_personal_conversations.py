"""A person's own transcripts: the conversations a token issued to them sends, with their
lines, are theirs alone (docs/conversations.md, "Personal conversations")."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from teams.rls import WRITER_OWNER_FUNCTIONS, WRITER_OWNER_FUNCTIONS_REVERSE, enable_personal_writer_rows


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0019_conversation_retention_job"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
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
        migrations.AddField(
            model_name="conversationline",
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
        migrations.RunSQL(WRITER_OWNER_FUNCTIONS, reverse_sql=WRITER_OWNER_FUNCTIONS_REVERSE),
        enable_personal_writer_rows("memories_conversation", owner_from="memoryhub_owner_from_writer"),
        enable_personal_writer_rows(
            "memories_conversationline", owner_from="memoryhub_owner_from_conversation"
        ),
    ]
