"""How the admin's pages show an item's values: ages, an error's first line, a trace link."""

from __future__ import annotations

import re
from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html

from wqcore.conf import wq_settings

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def age(when: datetime | None) -> str:
    """How long ago, in the largest whole unit: 42s, 5m, 3h, 2d."""
    if when is None:
        return "-"
    seconds = max((timezone.now() - when).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def first_line(text: str, limit: int = 120) -> str:
    """The text's first line, cut to ``limit`` characters (an ellipsis says it was cut)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def trace_link(traceparent: str | None) -> str:
    """An item's trace id, linked to the tracing UI by ``WORKQUEUE["TRACE_URL_TEMPLATE"]``
    (plain text when that is empty)."""
    match = _TRACEPARENT.match((traceparent or "").strip().lower())
    if match is None:
        return traceparent or "-"
    trace_id = match.group(1)
    template = wq_settings.TRACE_URL_TEMPLATE
    if not template:
        return trace_id
    url = template.replace("{trace_id}", trace_id)
    return format_html('<a href="{}" id="trace-link" rel="noopener">{}</a>', url, trace_id)
