from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    """pgvector is not a trusted extension: on an external server a superuser runs
    CREATE EXTENSION vector first (see README); then this is a no-op."""

    dependencies = []

    operations = [VectorExtension()]
