"""Made by ``makemigrations`` (Django 6.1.3); lists turned into tuples, which Django copies anyway."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = ()

    operations = (
        migrations.CreateModel(
            name="Book",
            fields=[
                (
                    "id",
                    models.AutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID"),
                ),
                ("title", models.CharField(max_length=200)),
                ("slug", models.SlugField(max_length=200)),
                ("author", models.CharField(max_length=200)),
                (
                    "status",
                    models.CharField(
                        choices=[("draft", "Draft"), ("review", "In review"), ("published", "Published")],
                        default="draft",
                        max_length=20,
                    ),
                ),
                ("in_stock", models.BooleanField(default=True)),
                ("published", models.DateField(blank=True, null=True)),
                ("notes", models.TextField(blank=True)),
            ],
        ),
    )
