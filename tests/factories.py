"""Factories for test rows, written as the owner so any tenant's rows can be set up."""

from __future__ import annotations

import factory
from factory.django import DjangoModelFactory

from tenancy.models import Membership, Org, Role, User


class OrgFactory(DjangoModelFactory):
    class Meta:
        model = Org
        database = "admin"

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class UserFactory(DjangoModelFactory):
    class Meta:
        model = User
        database = "admin"

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")


class MembershipFactory(DjangoModelFactory):
    class Meta:
        model = Membership
        database = "admin"

    org = factory.SubFactory(OrgFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.MEMBER
