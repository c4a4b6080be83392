"""The queue's admin: work items, dead letters and the operator's controls, each in its module
(``items``, ``dead_letters``, ``controls``; the triage actions in ``actions``). This module
only registers them (Django's autodiscovery imports it)."""

from django.contrib import admin

from workqueue.admin.controls import PauseAdmin, TenantShareAdmin
from workqueue.admin.dead_letters import DeadLetterAdmin
from workqueue.admin.items import WorkItemAdmin
from workqueue.admin.rate_limits import RateLimitAdmin
from workqueue.models import DeadLetter, Pause, RateLimit, TenantShare, WorkItem

admin.site.register(WorkItem, WorkItemAdmin)
admin.site.register(DeadLetter, DeadLetterAdmin)
admin.site.register(TenantShare, TenantShareAdmin)
admin.site.register(Pause, PauseAdmin)
admin.site.register(RateLimit, RateLimitAdmin)
