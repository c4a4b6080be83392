"""manage.py queue check-deploy: before a deploy, what is queued that the code about to run
cannot run (``workqueue/deploy_check.py``); exits 1 when it finds any, for a CI pipeline to
stop on. Run it with the new code against the live database (a release step, a job in the
new image): the kinds are the ones this process registers."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workqueue.deploy_check import SAMPLE_PER_KIND, queued_problems

HELP = (
    "Check what is queued against this code's kinds: unknown kinds, payloads their schemas now "
    "refuse (a sample per kind); exits 1 when something would fail after the deploy."
)


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--sample",
        type=int,
        default=SAMPLE_PER_KIND,
        metavar="N",
        help=f"queued payloads validated per kind (default {SAMPLE_PER_KIND}; 0: none)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(command: BaseCommand, **options: Any) -> None:
    sample = options.get("sample", SAMPLE_PER_KIND)
    if sample < 0:
        raise CommandError(f"--sample: must be 0 or more, got {sample}")
    found = queued_problems(sample)
    if options.get("json"):
        command.stdout.write(
            json.dumps(
                {
                    "unknown_kinds": [{"kind": p.kind, "items": p.items} for p in found.unknown],
                    "invalid_payloads": [
                        {
                            "kind": p.kind,
                            "sampled": p.sampled,
                            "invalid": p.invalid,
                            "first_id": str(p.first_id),
                            "first_error": p.first_error,
                        }
                        for p in found.invalid
                    ],
                },
                sort_keys=True,
            )
        )
    else:
        for line in found.lines():
            command.stdout.write(line)
        if not found:
            command.stdout.write("nothing queued that this code cannot run")
    if found:
        raise CommandError(f"{len(found.lines())} problem(s) with queued work", returncode=1)
