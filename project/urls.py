from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from project import views
from workers import dashboard

urlpatterns = [
    path("", views.landing, name="landing"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The queue's gauges, inside the admin (its sign-in, its look).
    path("admin/gauges/", admin.site.admin_view(dashboard.gauges), name="admin-gauges"),
    path("admin/", admin.site.urls),
    path("", include("workqueue.urls")),
    path("", include("workers.shipment_notifier.urls")),
    # /metrics for Prometheus (django-prometheus).
    path("", include("django_prometheus.urls")),
]

# Errors under /api/ answer in JSON; elsewhere Django's pages.
handler403 = "project.views.forbidden"
handler404 = "project.views.not_found"
handler500 = "project.views.server_error"
