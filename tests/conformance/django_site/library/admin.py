"""The admin as a site would configure it: a list with filters and actions, a slug filled in by the
admin's JavaScript as the title is typed, a date with the calendar widget, notes in a collapsed
fieldset (a ``<details>`` element)."""

from typing import ClassVar

from django.contrib import admin

from library.models import Book


@admin.register(Book)
class BookAdmin(admin.ModelAdmin):
    list_display = ("title", "author", "status", "in_stock")
    list_filter = ("status", "in_stock")
    search_fields = ("title", "author")
    prepopulated_fields: ClassVar[dict[str, tuple[str, ...]]] = {"slug": ("title",)}
    fieldsets = (
        (None, {"fields": ("title", "slug", "author", "status", "in_stock", "published")}),
        ("Notes", {"classes": ("collapse",), "fields": ("notes",)}),
    )
