"""Errors of the tenancy app."""


class TenancyError(Exception):
    """Base of the tenancy errors. Do not raise directly."""


class NotFound(TenancyError):
    """The tenant (or the member) asked for does not exist or is gone."""


class NoContext(TenancyError):
    """An operation needs a tenant's context and none is named for what runs now."""
