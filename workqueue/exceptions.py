"""Errors of the work queue."""

from tenancy.exceptions import NotFound as TenancyNotFound


class WorkQueueError(Exception):
    """Base of the work-queue errors. Do not raise directly."""


class Conflict(WorkQueueError):
    """The write was refused: the caller no longer holds the item's claim (a stale holder)."""


class NotFound(WorkQueueError, TenancyNotFound):
    """No such item in the caller's tenant."""


class InvalidPayload(WorkQueueError, ValueError):
    """The kind is unknown or the payload does not fit its schema; nothing was stored."""


class UnstorableResult(WorkQueueError, ValueError):
    """What a handler returned cannot be stored as its item's result; nothing was stored."""
