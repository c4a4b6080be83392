"""The triage by filter's inputs, without a database: the moment a filter starts from, the
error text as a pattern, the filter's checks, and the trace link setting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from workqueue import api
from workqueue.triage import DeadFilter, parse_since
from workqueue.triage.matching import _like
from wqcore.conf import load


def test_a_moment_is_iso_8601_a_date_or_a_while_ago() -> None:
    assert parse_since("2026-12-01T09:30:00+00:00") == datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    assert parse_since("2026-12-01") == datetime(2026, 12, 1, tzinfo=UTC)
    since = parse_since("6h")
    ago = timezone.now() - since
    assert timedelta(hours=6) <= ago < timedelta(hours=6, seconds=5)
    for bad in ("yesterday", "2026-12-01T09:30:00", "", "6 h", "1e9d"):
        with pytest.raises(api.InvalidPayload, match="--failed-since: must be a timestamp"):
            parse_since(bad, "--failed-since")


def test_error_text_is_matched_literally() -> None:
    assert _like("100% bad_input\\") == "%100\\% bad\\_input\\\\%"
    assert _like(None) is None


def test_a_filter_names_what_is_wrong() -> None:
    with pytest.raises(api.InvalidPayload, match="failed_since: must be a timestamp"):
        DeadFilter(failed_since=datetime(2026, 1, 1)).checked()
    assert DeadFilter(kind="NOOP", error_contains="x").described() == {
        "kind": "NOOP",
        "error_contains": "x",
    }


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("http://jaeger:16686/trace/", "must contain {trace_id}"),
        ("javascript:alert({trace_id})", "must be an http(s) URL or a path"),
    ],
)
def test_the_trace_url_template_is_checked(value: str, says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"WORKQUEUE\['TRACE_URL_TEMPLATE'\]"):
        load({"TRACE_URL_TEMPLATE": value})
    with pytest.raises(ImproperlyConfigured, match=says.replace("(", r"\(").replace(")", r"\)")):
        load({"TRACE_URL_TEMPLATE": value})
    assert load({"TRACE_URL_TEMPLATE": "https://tempo/trace/{trace_id}"}).TRACE_URL_TEMPLATE
