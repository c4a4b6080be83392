"""Django's classes that django-stubs makes generic, subscriptable when running too.

``ModelAdmin[Pause]`` tells the type checker which model an admin shows, ``ModelForm[Org]``
which model a form saves; Django's own classes take no subscript (they have no
``__class_getitem__``), so running code gets a subclass of each that takes one and drops it.
Only the classes the apps subclass, and only here: a site installing the apps need not call
``django_stubs_ext.monkeypatch()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.core import paginator

if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin
    ModelForm = forms.ModelForm
    Paginator = paginator.Paginator
else:

    class _Subscriptable:
        def __class_getitem__(cls, params: Any) -> type:
            return cls

    class ModelAdmin(_Subscriptable, admin.ModelAdmin):
        pass

    class ModelForm(_Subscriptable, forms.ModelForm):
        pass

    class Paginator(_Subscriptable, paginator.Paginator):
        pass


__all__ = ["ModelAdmin", "ModelForm", "Paginator"]
