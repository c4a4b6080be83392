"""The work queue: its items, their transitions, the admin and the enqueue API."""

from pathlib import Path

# Where the queue's named statements live (each ``<name>.sql`` with a line of intent).
SQL_DIR = Path(__file__).with_name("sql")
