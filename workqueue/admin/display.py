"""How the admin's pages show an item's values: ages, an error's first line, a trace link, its
progress."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.html import format_html

from wqcore.conf import wq_settings

# The most of a progress note the item list shows (its page shows the whole note).
NOTE_SHOWN = 40
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


def _count(value: Any) -> str:
    """A count as people read it: 1,000; 2.5; 1,234.57."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}".rstrip("0").rstrip(".")


def share(progress: dict[str, Any] | None) -> float | None:
    """How much of the whole is done, 0 to 1 (None: no report, or no total to measure by)."""
    if not progress:
        return None
    done, total = progress.get("done"), progress.get("total")
    if not isinstance(done, int | float) or not isinstance(total, int | float) or total <= 0:
        return None
    return min(max(done / total, 0.0), 1.0)


def progress_text(progress: dict[str, Any] | None, note_limit: int = NOTE_SHOWN) -> str:
    """An item's progress (``WorkItem.progress``) in one line: ``450 / 1,000 (45%) rows``,
    ``450 rows`` without a total, ``-`` before its first report; the note cut to
    ``note_limit``."""
    if not progress or not isinstance(progress.get("done"), int | float):
        return "-"
    text = _count(progress["done"])
    total = progress.get("total")
    if isinstance(total, int | float):
        text += f" / {_count(total)}"
        part = share(progress)
        if part is not None:
            text += f" ({int(part * 100)}%)"
    note = first_line(str(progress.get("note") or ""), note_limit)
    return f"{text} {note}" if note else text
