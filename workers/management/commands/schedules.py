"""manage.py schedules list | pause NAME | resume NAME: the declared schedules and their state,
and an operator's pause and resume (audited in every tenant the schedule serves)."""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy.contexts import SYSTEM_ACTOR, AppType, actor_of, new_request_context
from workers import schedule_state
from workers.schedules import all_schedules


def _when(value: Any) -> str:
    return value.isoformat() if value is not None else "-"


class Command(BaseCommand):
    help = (
        "The declared schedules (list: each one's rule, tenants, last and next tick, skipped "
        "ticks, paused) and pausing or resuming one (a resumed schedule starts at its next "
        "tick). Pause and resume are audited with --actor (a user of the site, by username; "
        "without it the system actor, noting the OS user)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="every declared schedule and where it stands")
        for action in ("pause", "resume"):
            one = sub.add_parser(action, help=f"{action} one schedule, audited")
            one.add_argument("name", help="the schedule's declared name")
            one.add_argument("--actor", help="the operator's username (the audit entry's actor)")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "list":
            self._list()
            return
        name, actor = options["name"], self._actor(options.get("actor"))
        rctx = new_request_context(AppType.CLI)
        via = f"manage.py schedules {action} (os user {getpass.getuser()})"
        change = schedule_state.pause if action == "pause" else schedule_state.resume
        try:
            state = change(name, actor=actor, rctx=rctx, via=via)
        except LookupError as exc:
            raise CommandError(str(exc.args[0])) from None
        if state is None:
            raise CommandError(
                f"schedule {name!r} is {'already' if action == 'pause' else 'not'} paused"
            )
        self.stdout.write(f"schedule {name} {'paused' if state.paused else 'resumed'}")

    def _actor(self, username: str | None) -> str:
        if username is None:
            return SYSTEM_ACTOR
        users = get_user_model()._default_manager
        try:
            return actor_of(users.get_by_natural_key(username))
        except users.model.DoesNotExist:
            raise CommandError(f"--actor: no user {username[:100]!r}") from None

    def _list(self) -> None:
        now, states = schedule_state.read_states()
        declared = all_schedules()
        if not declared:
            self.stdout.write("no schedule is declared")
        for schedule in declared:
            state = states.get(schedule.name)
            paused = state is not None and state.paused
            self.stdout.write(
                f"{schedule.name} kind={schedule.kind} {schedule.rule} "
                f"tenant={schedule.tenant or 'site'} paused={'yes' if paused else 'no'} "
                f"last_tick={_when(state.last_enqueued_tick if state else None)} "
                f"next_tick={'-' if paused else _when(schedule.next_tick(now))} "
                f"skipped={state.skipped if state else 0} enqueued={state.enqueued if state else 0}"
            )
        for name in sorted(set(states) - {s.name for s in declared}):
            self.stdout.write(f"{name} (no longer declared: its row is kept)")
