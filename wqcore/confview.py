"""Typed views of the settings: a frozen dataclass whose fields are ``WORKQUEUE`` names under
short names of its own (a worker's ``lease_s`` is ``WORKER_LEASE_S``), so the code that reads
them keeps its names and types while each default and bound stays written once, in ``conf.py``.

A field made by ``setting(NAME)`` holds the value in effect unless one is given (a test's, the
command line's); a given one is checked by the setting's own definition, refused in the same
one line naming it.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from wqcore.conf import with_values, wq_settings


def setting(name: str, option: str = "") -> Any:
    """A view's field that is ``WORKQUEUE[name]``; ``option``: the command line's that gives it
    too, named with the setting in a message (``--lane/WORKER_LANE: ...``)."""
    return dataclasses.field(
        default_factory=partial(getattr, wq_settings, name),
        metadata={"setting": name, "label": f"{option}/{name}" if option else ""},
    )


@dataclasses.dataclass(frozen=True)
class View:
    """The base of a view: its ``setting()`` fields checked as one (its other fields are its
    own, left as given)."""

    def __post_init__(self) -> None:
        fields = [f for f in dataclasses.fields(self) if "setting" in f.metadata]
        checked = with_values(
            {f.metadata["setting"]: getattr(self, f.name) for f in fields},
            {f.metadata["setting"]: f.metadata["label"] for f in fields if f.metadata["label"]},
        )
        # What the definition made of each value (a given 3 is the float 3.0).
        for f in fields:
            object.__setattr__(self, f.name, getattr(checked, f.metadata["setting"]))

    @classmethod
    def label(cls, field: str) -> str:
        """How a message names ``field``: ``--lane/WORKER_LANE``, or ``WORKER_LEASE_S``."""
        (found,) = (f for f in dataclasses.fields(cls) if f.name == field)
        return str(found.metadata["label"] or found.metadata["setting"])
