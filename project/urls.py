from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from project import views

urlpatterns = [
    path("", views.landing, name="landing"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The admin: the queue's pages are its apps' (work items, dead letters, queue gauges).
    path("admin/", admin.site.urls),
    # The queue's one URL module (the enqueue API), and the demo's pages.
    path("", include("workqueue.urls")),
    path("", include("workers.demo.urls")),
    # /healthz, /metrics and /metrics/queue: the apps' workers.urls, which a site includes here;
    # this site answers them in a middleware first of all instead (project/ops.py).
]

# Errors under /api/ answer in JSON; elsewhere Django's pages.
handler403 = "project.views.forbidden"
handler404 = "project.views.not_found"
handler500 = "project.views.server_error"
