"""The log lines: one event and its fields, as text (quoted values) or as one JSON object, and
the running item's id, kind, tenant, attempt and trace id on every line logged meanwhile."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import uuid
from types import SimpleNamespace

import pytest

from wqcore.logs import ItemFilter, bind_item, event_name, formatter, log_event

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
ITEM = SimpleNamespace(
    id=uuid.UUID("01930000-0000-7000-8000-000000000001"),
    kind="SEND_RECEIPT",
    org_id=uuid.UUID("01930000-0000-7000-8000-0000000000aa"),
    attempts=3,
    traceparent=f"00-{TRACE_ID}-b7ad6b7169203331-01",
)


def _logger(output: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(output))
    handler.addFilter(ItemFilter())
    logger = logging.getLogger(f"tests.logs.{uuid.uuid4().hex[:8]}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


def _json_lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_an_event_is_one_json_object_with_its_fields() -> None:
    logger, stream = _logger("json")
    log_event(logger, logging.INFO, "worker_stopping", worker="h:1:ab", in_flight=3)
    [line] = _json_lines(stream)
    assert line["event"] == "worker_stopping" and line["level"] == "info"
    assert line["worker"] == "h:1:ab" and line["in_flight"] == 3
    assert line["logger"] == logger.name and line["ts"].endswith("Z")


def test_every_line_while_an_item_runs_names_it() -> None:
    logger, stream = _logger("json")

    def run() -> None:  # the item's own context, as its task's
        bind_item(ITEM)
        log_event(logger, logging.WARNING, "item_dead_lettered", error="PermanentError: gone")
        logger.info("a handler's own line")  # not through log_event: its message is the event

    contextvars.copy_context().run(run)
    log_event(logger, logging.INFO, "after")
    dead, own, after = _json_lines(stream)
    for line in (dead, own):
        assert line["item"] == str(ITEM.id) and line["kind"] == "SEND_RECEIPT"
        assert line["tenant"] == str(ITEM.org_id) and line["attempt"] == 3
        assert line["trace_id"] == TRACE_ID
    assert dead["level"] == "warning" and dead["error"] == "PermanentError: gone"
    assert own["event"] == "a handler's own line"
    assert "item" not in after


def test_an_exception_is_one_line_of_json_with_its_traceback() -> None:
    logger, stream = _logger("json")
    try:
        raise RuntimeError("broke\nacross lines")
    except RuntimeError:
        log_event(logger, logging.ERROR, "sweep_step_failed", exc_info=True, step="purge")
    [line] = stream.getvalue().splitlines()
    parsed = json.loads(line)
    assert parsed["step"] == "purge" and "RuntimeError: broke" in parsed["exc"]
    assert parsed["exc"].startswith("Traceback")


def test_text_quotes_strings_and_leaves_numbers_bare() -> None:
    logger, stream = _logger("text")
    log_event(logger, logging.INFO, "worker_started", worker='h:1:"x"', capacity=8, sweep=True)
    [line] = stream.getvalue().splitlines()
    assert line.startswith("ts=") and " level=info logger=" in line
    assert line.endswith('worker_started worker="h:1:\\"x\\"" capacity=8 sweep=true')


def test_access_lines_of_the_development_server_are_http_request_events() -> None:
    logger, stream = _logger("json")
    server = logging.getLogger("django.server")
    record = server.makeRecord(
        "django.server",
        logging.INFO,
        __file__,
        1,
        '"%s" %s %s',
        ("GET /admin/?q=1 HTTP/1.1", "200", "512"),
        None,
        extra={"status_code": 200},
    )
    logger.handlers[0].handle(record)
    [line] = _json_lines(stream)
    assert line["event"] == "http_request" and line["logger"] == "django.server"
    assert (line["method"], line["path"], line["status"], line["size"]) == (
        "GET",
        "/admin/?q=1",
        200,
        512,
    )


def test_gunicorn_access_lines_are_http_request_events() -> None:
    logger, stream = _logger("json")
    atoms = {"m": "POST", "U": "/api/work/", "s": "201", "B": "88", "D": "1500", "h": "10.0.0.1"}
    record = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, "%(h)s", (), None)
    record.args = atoms  # gunicorn logs its atoms as the one mapping argument
    logger.handlers[0].handle(record)
    [line] = _json_lines(stream)
    assert line["event"] == "http_request" and line["status"] == 201
    assert line["path"] == "/api/work/" and line["duration_ms"] == 1.5


def test_our_formatter_without_our_filter_still_names_the_running_item() -> None:
    """A site's handler may take the queue's formatter and leave ``ItemFilter`` off: the item
    comes from the context then, and the line is written, not a logging error."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter("json"))
    logger = logging.getLogger(f"tests.logs.{uuid.uuid4().hex[:8]}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)

    def run() -> None:  # the item's own context, as its task's
        bind_item(ITEM)
        logger.info("a handler's own line")

    contextvars.copy_context().run(run)
    [line] = _json_lines(stream)
    assert line["event"] == "a handler's own line" and line["item"] == str(ITEM.id)


def test_a_wrong_output_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        formatter("yaml")


def test_an_item_bound_to_a_task_is_named_on_its_lines_written_out_only_when_one_is_logged() -> (
    None
):
    """A worker binds every item it runs (``bind_item``); the fields are written out when a line
    is logged, once, so the many items that log nothing cost none of it."""

    from wqcore import logs

    calls = []
    real = logs.fields_of_item

    def counted(item):  # type: ignore[no-untyped-def]
        calls.append(item)
        return real(item)

    logger, stream = _logger("json")

    def run() -> None:
        logs.bind_item(ITEM)
        assert calls == []  # bound, nothing written out yet
        log_event(logger, logging.INFO, "first")
        log_event(logger, logging.INFO, "second")

    logs.fields_of_item = counted  # type: ignore[assignment]
    try:
        contextvars.copy_context().run(run)
    finally:
        logs.fields_of_item = real  # type: ignore[assignment]
    first, second = _json_lines(stream)
    assert first["item"] == second["item"] == str(ITEM.id) and first["attempt"] == 3
    assert len(calls) == 1
    assert logs.current_item_fields() is None  # the binding stayed in the task's context


def test_a_sites_own_formatter_sees_the_event_its_fields_and_the_running_item() -> None:
    """A site with its own ``LOGGING`` (``%(message)s``, no filter of ours) still reads which
    item, kind and error a line is about; the template names the fields, never their values,
    so an error tracker groups the lines by event."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(f"tests.logs.{uuid.uuid4().hex[:8]}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)

    def run() -> None:  # the item's own context, as its task's
        bind_item(ITEM)
        log_event(logger, logging.WARNING, "item_dead_lettered", error='Boom: 100% "off"')

    contextvars.copy_context().run(run)
    log_event(logger, logging.INFO, "worker_stopping", in_flight=3, note=None)
    dead, stopping = stream.getvalue().splitlines()
    assert dead == (
        f'WARNING {logger.name}: item_dead_lettered item="{ITEM.id}" kind="SEND_RECEIPT" '
        f'tenant="{ITEM.org_id}" attempt=3 trace_id="{TRACE_ID}" error="Boom: 100% \\"off\\""'
    )
    assert stopping == f"INFO {logger.name}: worker_stopping in_flight=3"


def test_the_message_template_names_the_fields_and_the_record_keeps_the_event() -> None:
    logger = logging.getLogger(f"tests.logs.{uuid.uuid4().hex[:8]}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    records: list[logging.LogRecord] = []
    logger.handlers[:] = [_Keep(records)]
    for error in ("A: one", "B: two"):
        log_event(logger, logging.WARNING, "item_dead_lettered", error=error)
    assert {r.msg for r in records} == {"item_dead_lettered error=%s"}
    assert [event_name(r) for r in records] == ["item_dead_lettered"] * 2
    logger.warning("a library's line")
    assert event_name(records[-1]) == "a library's line"


class _Keep(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
