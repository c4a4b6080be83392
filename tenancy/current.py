"""The context of the operation running now, for code that is handed none.

Django's task API (``@task`` ... ``.enqueue()``, ``.get_result()``) passes no context, so the
tenant comes from here: the tenancy middleware names the signed-in member's context for the
request (it ends with the request), a worker names the item's context while a task runs, and
anything else (a management command, a shell, a script, a test) names one explicitly::

    from workqueue import api

    with api.tenant(org_or_slug):
        send_report.enqueue(report_id)

A single-tenant site names nothing: its one tenant (as the system) is the default.

It is a context variable: each thread and each asyncio task sees its own, and
``sync_to_async``/``async_to_sync`` carry it across. With none named,
``tenancy.naming.require_context`` raises ``NoContext`` saying how to name one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

from tenancy.contexts import OpContext

_CURRENT: ContextVar[OpContext | None] = ContextVar("tenancy_current_context", default=None)


def current_context() -> OpContext | None:
    """The context named for what runs now, or None."""
    return _CURRENT.get()


@contextmanager
def using_context(ctx: OpContext) -> Iterator[OpContext]:
    """Name ``ctx`` as the current context for the block; the previous one comes back after."""
    if not isinstance(ctx, OpContext):
        raise TypeError(f"using_context takes an OpContext, got {type(ctx).__name__}")
    token = _CURRENT.set(ctx)
    try:
        yield ctx
    finally:
        _CURRENT.reset(token)


def bind(ctx: OpContext | None) -> Token[OpContext | None]:
    """Name ``ctx`` until the returned token is passed to ``unbind`` (the middleware's pair:
    it names the context in ``process_view`` and ends it in ``__call__``)."""
    return _CURRENT.set(ctx)


def unbind(token: Token[OpContext | None]) -> None:
    _CURRENT.reset(token)
