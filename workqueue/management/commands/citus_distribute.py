"""manage.py citus_distribute: lay the queue's tables out on a Citus coordinator, after migrate."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workqueue.citus import (
    COORDINATOR_TABLES,
    REFERENCE_TABLES,
    TENANT_TABLES,
    NotCitus,
    distribute,
    plan,
    shard_fences,
    site_tables,
)


class Command(BaseCommand):
    help = (
        "On a Citus coordinator, after migrate, as the tables' owner: give every unique and "
        "primary key of the queue's tenant tables org_id, replace the two statement triggers "
        "Citus cannot run on shards with composite foreign keys, distribute the tenant tables "
        "by org_id colocated with workqueue_workitem, make the small shared tables reference "
        "tables, leave the fleet's tables on the coordinator, then grant the logins again. "
        "Only what is not done yet is done: run it after every migrate. Refuses a database "
        "without Citus."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="print the statements instead of running them"
        )
        parser.add_argument("--database", help="the alias to run on (default: the owner's)")

    def handle(self, *args: Any, dry_run: bool, database: str | None, **options: Any) -> None:
        try:
            statements = plan(database) if dry_run else distribute(database)
        except NotCitus as exc:
            raise CommandError(str(exc)) from exc
        others = ", ".join(site_tables(database))
        if dry_run:
            for statement in statements:
                self.stdout.write(statement + ";")
            if not statements:
                self.stdout.write("-- nothing to do: the queue's tables are laid out")
            if others:
                self.stdout.write(f"-- the site's own tenant tables, left as they are: {others}")
            return
        self.stdout.write(
            f"{len(statements)} statements run: {len(TENANT_TABLES)} tenant tables distributed "
            f"by org_id, {len(REFERENCE_TABLES)} reference tables, "
            f"{len(COORDINATOR_TABLES)} left on the coordinator"
        )
        if others:
            self.stdout.write(
                f"the site's own tenant tables, left as they are: {others} (distribute each "
                "by org_id colocated with workqueue_workitem: docs/howto/citus.md)"
            )
        unfenced = [(t, n, bare) for t, n, bare in shard_fences(database) if bare]
        for table, placements, bare in unfenced:
            self.stderr.write(f"{table}: {bare} of {placements} placements lack the policies")
        if unfenced:
            raise CommandError("row-level security is not on every shard (see above)")
