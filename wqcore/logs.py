"""Logs: each line one event, its name and its fields, as readable text or as one JSON object.

Code logs an event with ``log_event(logger, logging.INFO, "worker_stopping", worker=...,
in_flight=3)``: its name and fields ride in ``extra`` (``record.wq_event``,
``record.wq_fields``), so this module's formatters write them whole instead of parsing a
sentence; the record's message says them too (``worker_stopping worker="…" in_flight=3``, the
running item's fields first), so a site's own formatter (``%(message)s``) loses none of them.
The message's template names the event and its fields' names only (``item_retried item=%s
kind=%s …``), the values are its arguments: an error tracker groups the lines by it. While
an item runs, ``bind_item(item)`` names it in its task's context variable and ``ItemFilter`` (on the
site's handlers) adds its id, kind, tenant, attempt and trace id to every line logged meanwhile,
the queue's own and a handler's alike; outside an item, a line logged under a recording span
gets that span's trace id.

Two outputs, one shape (``formatter(output=...)``, default ``WORKQUEUE["LOG_FORMAT"]``):

- text: ``ts=2026-12-01T21:20:00.123Z level=warning logger=workers.running work_dead_lettered
  item="…" kind="NOOP" attempt=5 error="PermanentError: no such shipment"``: strings quoted (JSON
  escapes, so a line stays one line), numbers and booleans bare; a traceback follows on its own
  lines;
- json: ``{"ts": …, "level": "warning", "logger": …, "event": …, <fields>, "exc": <traceback>}``,
  one object per line (python-json-logger).

A record that did not come through ``log_event`` (a library's) keeps its message as the event.
The development server's and gunicorn's access lines become ``http_request`` events with the
method, path, status and size as fields.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
from collections.abc import Mapping
from typing import Any

from pythonjsonlogger.json import JsonFormatter

# The record attributes this module adds: the event's name and its own fields, and the running
# item's.
EVENT = "wq_event"
FIELDS = "wq_fields"
ITEM = "wq_item"


class _Bound:
    """The item running in a context; its fields are written out only when a line is logged
    (most items log none, and a worker binds every item it runs)."""

    __slots__ = ("_fields", "item")

    def __init__(self, item: Any) -> None:
        self.item = item
        self._fields: dict[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        if self._fields is None:
            self._fields = fields_of_item(self.item)
        return self._fields


# The item running in this task or thread.
_current_item: contextvars.ContextVar[_Bound | None] = contextvars.ContextVar(
    "workqueue_current_item", default=None
)


def log_event(
    logger: logging.Logger,
    level: int,
    event: str,
    /,
    *,
    exc_info: Any = None,
    **fields: Any,
) -> None:
    """Log ``event`` (a snake_case name) with ``fields``; the message says both, after the
    running item's fields."""
    if logger.isEnabledFor(level):
        said = {**(current_item_fields() or {}), **fields}
        values = tuple(_text_value(value) for value in said.values() if value is not None)
        # No arguments: logging leaves the message as it is, so a % needs no escape.
        template = (event.replace("%", "%%") if values else event) + "".join(
            f" {key}=%s" for key, value in said.items() if value is not None
        )
        logger.log(
            level,
            template,
            *values,
            exc_info=exc_info,
            extra={EVENT: event, FIELDS: fields},
            stacklevel=2,
        )


def event_name(record: logging.LogRecord) -> str:
    """The event a record is about: its ``log_event`` name, else its message (a library's)."""
    return str(getattr(record, EVENT, None) or record.getMessage())


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``)."""
    if not traceparent:
        return None
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def fields_of_item(item: Any) -> dict[str, Any]:
    """What every line about ``item`` (a work item) carries."""
    return {
        "item": str(item.id),
        "kind": item.kind,
        "tenant": str(item.org_id),
        "attempt": item.attempts,
        "trace_id": trace_id_of(getattr(item, "traceparent", None)),
    }


def bind_item(item: Any) -> None:
    """Name ``item`` on every line logged from now on in this context: for a context that is
    the item's alone (an asyncio task runs in a copy of its creator's), and the threads it
    hands a copy of it to."""
    _current_item.set(_Bound(item))


def current_item_fields() -> Mapping[str, Any] | None:
    bound = _current_item.get()
    return None if bound is None else bound.fields()


def _span_trace_id() -> str | None:
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - the API is a dependency
        return None
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class ItemFilter(logging.Filter):
    """Adds the running item's fields (or the current span's trace id) to each record; put it
    on the handlers, so it sees every logger's records."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, ITEM):
            item = current_item_fields()
            if item is None:
                trace_id = _span_trace_id()
                item = {"trace_id": trace_id} if trace_id else None
            setattr(record, ITEM, item)
        return True


# -- what a line says -------------------------------------------------------------------------


def _access_fields(record: logging.LogRecord) -> dict[str, Any] | None:
    """The fields of an access line from Django's development server or gunicorn, or None."""
    if record.name == "django.server" and isinstance(record.args, tuple) and len(record.args) == 3:
        request, status, size = record.args
        method, _, rest = str(request).partition(" ")
        path = rest.rsplit(" ", 1)[0] if " " in rest else rest
        return {
            "method": method,
            "path": path,
            "status": getattr(record, "status_code", None) or status,
            "size": int(str(size)) if str(size).isdigit() else size,
        }
    if record.name == "gunicorn.access" and isinstance(record.args, Mapping):
        atoms = record.args
        duration_us = atoms.get("D")
        return {
            "method": atoms.get("m"),
            "path": atoms.get("U"),
            "status": int(str(atoms["s"])) if str(atoms.get("s", "")).isdigit() else atoms.get("s"),
            "size": int(str(atoms["B"])) if str(atoms.get("B", "")).isdigit() else atoms.get("B"),
            "duration_ms": round(int(str(duration_us)) / 1000, 3)
            if str(duration_us).isdigit()
            else None,
            "remote": atoms.get("h"),
        }
    return None


def event_of(record: logging.LogRecord) -> tuple[str, dict[str, Any]]:
    """The record's event name and its fields: the item's first, then the event's own."""
    fields: dict[str, Any] = {}
    item = getattr(record, ITEM, None)
    if item is None:
        item = current_item_fields()  # no filter on this handler: the context is still here
    if item:
        fields.update(item)
    own = getattr(record, FIELDS, None)
    if own is not None:
        fields.update(own)
        return str(getattr(record, EVENT, record.msg)), fields
    access = _access_fields(record)
    if access is not None:
        fields.update(access)
        return "http_request", fields
    return record.getMessage(), fields


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _text_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return "null"
    return json.dumps(str(value), ensure_ascii=False)


def event_text(record: logging.LogRecord) -> str:
    """The event and its fields as the text output writes them: ``event k="v" …``."""
    event, fields = event_of(record)
    pairs = "".join(
        f" {key}={_text_value(value)}" for key, value in fields.items() if value is not None
    )
    return f"{event}{pairs}"


class TextFormatter(logging.Formatter):
    """``ts=<ts> level=<level> logger=<logger> <event> k="v" …``, a traceback on the lines
    after."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"ts={_timestamp(record)} level={record.levelname.lower()} logger={record.name} "
            f"{event_text(record)}"
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonLineFormatter(JsonFormatter):
    """One JSON object per line: ts, level, logger, event, the fields, ``exc`` (a traceback)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("json_ensure_ascii", False)
        kwargs.setdefault("exc_info_as_array", False)
        super().__init__(*args, **kwargs)

    def add_fields(
        self,
        log_data: dict[str, Any],
        record: logging.LogRecord,
        message_dict: dict[str, Any],
    ) -> None:
        event, fields = event_of(record)
        log_data["ts"] = _timestamp(record)
        log_data["level"] = record.levelname.lower()
        log_data["logger"] = record.name
        log_data["event"] = event
        for key, value in fields.items():
            if key not in log_data:
                log_data[key] = value
        if record.exc_info:
            log_data["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            log_data["exc"] = record.exc_text

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return log_data

    def format(self, record: logging.LogRecord) -> str:
        log_data: dict[str, Any] = {}
        self.add_fields(log_data, record, {})
        return self.serialize_log_record(self.process_log_record(log_data))


OUTPUTS = ("text", "json")


def formatter(output: str | None = None) -> logging.Formatter:
    """The formatter for ``output`` (``text`` or ``json``; default ``WORKQUEUE["LOG_FORMAT"]``),
    for a site's ``LOGGING``: ``{"()": "wqcore.logs.formatter"}``."""
    if output is None:
        from django.core.exceptions import ImproperlyConfigured

        from wqcore.conf import wq_settings

        try:
            output = str(wq_settings.LOG_FORMAT)
        except ImproperlyConfigured:
            # Text until the settings are right: the queue's check says what to change, in one
            # line (a traceback out of the logging set-up would say it worse).
            output = "text"
    if output not in OUTPUTS:
        raise ValueError(f"LOG_FORMAT: must be 'text' or 'json' (got {output!r})")
    return JsonLineFormatter() if output == "json" else TextFormatter()


def logging_config(
    output: str | None = None, level: str = "INFO", loggers: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A ``LOGGING`` dict: one handler on stderr with the queue's formatter and ``ItemFilter``,
    at ``level``; ``loggers`` adds per-logger levels. Django's own loggers (``django``, and the
    development server's access lines, ``django.server``), which Django's defaults send to
    handlers of their own, go through it too, each line once."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"workqueue_item": {"()": "wqcore.logs.ItemFilter"}},
        "formatters": {"workqueue": {"()": "wqcore.logs.formatter", "output": output}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "workqueue",
                "filters": ["workqueue_item"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django": {"handlers": [], "level": "INFO", "propagate": True},
            "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
            **(loggers or {}),
        },
    }
