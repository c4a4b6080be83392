"""Factories for test rows, written as the owner so any tenant's rows can be set up."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from tenancy.contexts import Role
from tenancy.models import Membership, Org

User = get_user_model()


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
