"""One model with a field of each kind the admin renders as a different form control."""

from django.db import models


class Book(models.Model):
    STATUS_CHOICES = (("draft", "Draft"), ("review", "In review"), ("published", "Published"))

    title = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200)
    author = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default="draft")
    in_stock = models.BooleanField(default=True)
    published = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True)

    def __str__(self) -> str:
        return self.title
