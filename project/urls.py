from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # /metrics for Prometheus (django-prometheus).
    path("", include("django_prometheus.urls")),
]
