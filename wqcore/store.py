"""The store: every transition is a plan of named statements, run by one of two faces.

A plan (``wqcore.plans``) holds a transition's logic once; ``run`` drives it on the sync face
(``wqcore.sync_face``: Django's connections, joining the caller's transaction) and ``arun`` on
the async face (``wqcore.async_face``: the store's own psycopg async pools, on the caller's
event loop), so the two faces cannot drift. ``transition`` makes both faces of a plan at once:

    @transition
    def complete(ctx: OpContext, item: WorkItem) -> Plan[WorkItem]:
        \"\"\"Mark the item done, if its claim token still holds it.\"\"\"
        rows = yield Tenant(ctx.org_id, COMPLETE, ...)
        return ...

    complete(ctx, item)               # the sync face
    await complete.aio(ctx, item)     # the async face
    acomplete = complete.aio          # its public name, where it has one

Both faces prepare their statements on the server (each is planned once per connection)
unless a transaction pooler is in front (``WORKQUEUE["POOLER"] = "transaction"``, ``prepares``).
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate

from wqcore.async_face import (
    GENERIC,
    SYSTEM,
    TENANT,
    AsyncStore,
    aclose_async_store,
    arun,
    async_store,
    use_async_store,
)
from wqcore.own_connection import OwnConnection
from wqcore.plans import (
    PREPARE_THRESHOLD,
    Done,
    Plan,
    Rows,
    Step,
    System,
    Tenant,
    TenantBatches,
    TenantChain,
    begin,
    prepares,
)
from wqcore.sync_face import execute, run

__all__ = [
    "GENERIC",
    "PREPARE_THRESHOLD",
    "SYSTEM",
    "TENANT",
    "AsyncStore",
    "Done",
    "OwnConnection",
    "Plan",
    "Rows",
    "Step",
    "System",
    "Tenant",
    "TenantBatches",
    "TenantChain",
    "Transition",
    "aclose_async_store",
    "arun",
    "async_store",
    "begin",
    "execute",
    "prepares",
    "run",
    "transition",
    "use_async_store",
]


class Transition[**P, R]:
    """A transition: its plan, written once, and the two faces that run it.

    Calling it runs the plan on the sync face (``run``: Django's connections, joining the
    caller's transaction) and returns what the plan returns. ``aio`` runs it on the async face
    (``arun``: the store's own connections; it commits on its own and joins no transaction of
    the caller's). ``plan`` is the plan itself, for another plan to ``yield from``. The
    docstring, name and signature are the plan's.
    """

    def __init__(self, plan: Callable[P, Plan[R]]) -> None:
        self.plan = plan
        self._after_sync: Callable[Concatenate[R, P], None] | None = None
        functools.update_wrapper(self, plan)
        takes_ctx = _takes_ctx(plan)

        async def aio(*args: P.args, **kwargs: P.kwargs) -> R:
            if takes_ctx:
                _check_ctx(plan.__name__, args, kwargs)
            return await arun(plan(*args, **kwargs))

        functools.update_wrapper(aio, plan)  # its signature is the plan's (``__wrapped__``)
        aio.__name__ = aio.__qualname__ = f"a{plan.__name__}"
        aio.__doc__ = (
            f"Async version of ``{plan.__name__}``: on the store's own connections, it commits "
            "on its own and joins no transaction of the caller's."
        )
        self.aio: Callable[P, Coroutine[Any, Any, R]] = aio

        self._takes_ctx = takes_ctx

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._takes_ctx:
            _check_ctx(self.plan.__name__, args, kwargs)
        result = run(self.plan(*args, **kwargs))
        if self._after_sync is not None:
            self._after_sync(result, *args, **kwargs)
        return result

    def after_sync(
        self, hook: Callable[Concatenate[R, P], None]
    ) -> Callable[Concatenate[R, P], None]:
        """Decorate ``hook`` to run after the sync face's plan, in the caller's transaction,
        with the result and the call's arguments (a signal about what joined that
        transaction). The async face has no such transaction and runs nothing after."""
        self._after_sync = hook
        return hook

    def __repr__(self) -> str:
        return f"<transition {self.plan.__module__}.{self.plan.__qualname__}>"


transition = Transition


def _takes_ctx(plan: Callable[..., Any]) -> bool:
    params = list(inspect.signature(plan).parameters)
    return bool(params) and params[0] == "ctx"


def _check_ctx(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A plan's ``ctx`` must be a tenant's context: say what to pass, not fail deep inside
    with an ``AttributeError`` (a context is anything with the tenant's ``org_id``)."""
    ctx = args[0] if args else kwargs.get("ctx")
    if not isinstance(getattr(ctx, "org_id", None), uuid.UUID):
        raise TypeError(
            f"{name}: ctx must be a tenant's context (an OpContext), got {type(ctx).__name__}: "
            "in a view pass `request.op` (the tenancy middleware names it), outside one "
            "`with workqueue.api.tenant(org_or_slug) as ctx:` (`workqueue.api.context()` in "
            "a single-tenant site)"
        )
