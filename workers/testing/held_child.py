"""The process of a held worker (``held.py``): ``manage.py runworker`` for one kind in one lane,
on the test's database, with that kind's handler held at one point of its run.

Run by its path, not as a module: nothing of the site (or of this package, whose modules
need Django set up) loads before the test's database is named in the settings."""

import importlib
import json
import os
import sys
from pathlib import Path


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    sys.path[:] = config["sys_path"]
    os.environ["DJANGO_SETTINGS_MODULE"] = config["settings"]
    from django.conf import settings

    # The test runner renamed each database to its test database in its own process only.
    for alias, name in config["names"].items():
        settings.DATABASES[alias]["NAME"] = name
    settings.WORKQUEUE = {
        **getattr(settings, "WORKQUEUE", {}),
        # The test's process runs the rescue and the requeue itself, when the fault says.
        "WORKER_SWEEP": False,
        "WORKER_LIVENESS_LOCK": True,
        "WORKER_LEASE_S": config["lease_s"],
    }
    import django

    django.setup()
    for module in config["modules"]:
        importlib.import_module(module)
    from workers.testing import held

    held.hold_in_this_process(config)
    from django.core.management import call_command

    call_command(
        "runworker",
        config["kind"],
        "--lane",
        config["lane"],
        "--capacity",
        "1",
        "--metrics-port",
        "-1",
        "--noreload",
    )


if __name__ == "__main__":
    main(sys.argv[1])
