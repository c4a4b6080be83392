"""The web's health and metrics (``workers/views.py``): ``path("", include("workers.urls"))``
in the site's URLs (or under a prefix of its choice, e.g. ``path("ops/", ...)``)."""

from __future__ import annotations

from django.urls import path

from workers import views

urlpatterns = [
    path("healthz", views.healthz, name="workqueue-healthz"),
    path("metrics", views.metrics, name="workqueue-metrics"),
    path("metrics/queue", views.queue_gauges, name="workqueue-queue-metrics"),
]
