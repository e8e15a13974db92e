"""The admin, and the admin's own static files served by Django itself (no separate web server)."""

from django.contrib import admin
from django.contrib.staticfiles.views import serve
from django.urls import path, re_path

urlpatterns = [
    path("admin/", admin.site.urls),
    re_path(r"^static/(?P<path>.*)$", serve, {"insecure": True}),
]
