"""A contradiction resolved as compatible: remembered on the nudge."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("freshness", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="nudge",
            name="resolution",
            field=models.CharField(
                blank=True,
                choices=[
                    ("confirm", "Confirm"),
                    ("dismiss", "Dismiss"),
                    ("archive", "Archive"),
                    ("supersede", "Supersede"),
                    ("compatible", "Compatible"),
                ],
                default="",
                max_length=16,
            ),
        ),
    ]
