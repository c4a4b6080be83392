"""The enqueue API's URLs (with or without a trailing slash: a POST cannot be redirected)."""

from __future__ import annotations

from django.urls import re_path

from workqueue import views
from workqueue.workflow_views import cancel_workflow_view

urlpatterns = [
    re_path(r"^api/work/?$", views.work_collection, name="api-work"),
    re_path(r"^api/work/(?P<item_id>[^/]+)/?$", views.work_item, name="api-work-item"),
    re_path(r"^api/work/(?P<item_id>[^/]+)/cancel/?$", views.cancel_item, name="api-work-cancel"),
    re_path(
        r"^api/workflows/(?P<workflow_id>[^/]+)/cancel/?$",
        cancel_workflow_view,
        name="api-workflow-cancel",
    ),
]
