"""The queue's settings from the environment: each ``WORKQUEUE`` name read from the variable of
the same name (a few from their older, longer names), typed and checked by the queue itself
(``wqcore.conf``) when first read, with the queue's defaults for anything unset."""

from __future__ import annotations

from typing import Any, get_origin

import environ

from wqcore.conf import NAMES, Settings

# WORKQUEUE names read from another variable (the name alone would be unclear in a shell).
ENV_NAMES = {
    "LANES": "WORKQUEUE_LANES",
    "MAX_PAYLOAD_BYTES": "WORKQUEUE_MAX_PAYLOAD_BYTES",
    "CLAIM_DURABLE": "WORKQUEUE_CLAIM_DURABLE",
    "FAIR_CLAIM": "WORKQUEUE_FAIR_CLAIM",
    "MAX_IN_FLIGHT": "WORKQUEUE_MAX_IN_FLIGHT",
    "KIND_TIMEOUT_S": "WORKQUEUE_KIND_TIMEOUT_S",
    "LANE_CAPS": "WORKQUEUE_LANE_CAPS",
    "HANDLER_MODULES": "WORKER_HANDLER_MODULES",
}
# Set by the site itself, not from the environment.
SITE_ONLY = frozenset(
    {
        "DATABASE_ALIAS",
        "SYSTEM_DATABASE_ALIAS",
        "OWNER_DATABASE_ALIAS",
        "LISTEN_DATABASE_ALIAS",
        "AUTODISCOVER_MODULE",
    }
)


def env_name(name: str) -> str:
    return ENV_NAMES.get(name, name)


def workqueue_settings(env: environ.Env, **site: Any) -> dict[str, Any]:
    """``WORKQUEUE``: ``site``'s values, then every other name whose variable is set (lists as
    comma-separated values, mappings as ``name=value,...``, the rest as text the queue's
    settings type)."""
    values = dict(site)
    for name in NAMES:
        if name in values or name in SITE_ONLY:
            continue
        raw = env.str(env_name(name), default="")
        if raw.strip() == "":
            continue
        annotation = Settings.model_fields[name].annotation
        origin = get_origin(annotation)
        if origin is list:
            values[name] = env.list(env_name(name))
        elif origin is dict:
            values[name] = env.dict(env_name(name))
        else:
            values[name] = raw
    return values
