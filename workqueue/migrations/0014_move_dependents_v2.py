"""The function that moves a parent's waiting children, version 2 (``sql/schema/
move_dependents_v2.sql``): a child moves only by the edges of its own tenant. Version 1 counted every edge of a parent, and the statements that end items run on
the system login, which sees every tenant: an edge a tenant wrote in its own name to another
tenant's waiting step released that step. Version 1 stays for a release, for workers of the one
before this during a rolling deploy."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.actor import SYSTEM_ACTOR
from wqcore.sqlfiles import run_sql_file
from wqcore.statements import sql_literal


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0013_workflow_steps"),
    ]

    operations = [
        run_sql_file(
            SQL_DIR / "schema", "move_dependents_v2", system_actor=sql_literal(SYSTEM_ACTOR)
        ),
    ]
