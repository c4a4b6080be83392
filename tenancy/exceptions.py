"""Errors of the tenancy app."""


class TenancyError(Exception):
    """Base of the tenancy errors. Do not raise directly."""


class NotFound(TenancyError):
    """The tenant (or the member) asked for does not exist or is gone."""
