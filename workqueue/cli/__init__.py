"""The subcommands of ``manage.py queue``: one module each, listed in ``SUBCOMMANDS``.

A subcommand module has ``HELP`` (one line), ``add_arguments(parser)`` and
``run(command, **options)`` (``command`` is the Django command: its ``stdout``, ``style``).
"""

# Each entry names a module of this package (``module_name``); ``manage.py queue --help``
# lists them in this order.
SUBCOMMANDS: tuple[str, ...] = (
    "stats",
    "pause",
    "resume",
    "paused",
    "limit",
    "cancel",
    "requeue",
    "discard",
    "check-deploy",
    "dry-run",
    "erase",
)


def module_name(subcommand: str) -> str:
    """The module of a subcommand (a dash in its name is an underscore in the module's)."""
    return subcommand.replace("-", "_")
