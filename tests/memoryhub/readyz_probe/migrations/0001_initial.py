from django.db import migrations


class Migration(migrations.Migration):
    # Changes nothing: applying it only records it, so it is safe on the suite's database.
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunSQL(migrations.RunSQL.noop, migrations.RunSQL.noop)]
