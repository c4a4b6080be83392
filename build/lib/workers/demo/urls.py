"""The demo's pages."""

from __future__ import annotations

from django.urls import path

from workers.demo import views

urlpatterns = [
    path("demo/", views.book, name="demo"),
    path("demo/work/<uuid:work_id>/", views.work, name="demo-work"),
]
