"""The subcommands of ``manage.py queue``: one module each, listed in ``SUBCOMMANDS``.

A subcommand module has ``HELP`` (one line), ``add_arguments(parser)`` and
``run(command, **options)`` (``command`` is the Django command: its ``stdout``, ``style``).
"""

# Each entry is a module of this package; ``manage.py queue --help`` lists them in this order.
SUBCOMMANDS: tuple[str, ...] = (
    "stats",
    "pause",
    "resume",
    "paused",
    "limit",
    "cancel",
    "requeue",
    "discard",
)
