"""The demo: book a shipment and enqueue its notice in the same transaction, then watch the
notice's work move (in the outbox, pending, claimed, done).

``book`` is the pattern to copy for "change a record, and make sure its follow-up work
happens": the record and the outbox row are written in the view's one transaction (the tenancy
middleware runs the view inside the member's tenant scope), so both commit or neither does; the
relay turns the row into a work item with the row's id, and a worker runs it.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from outbox.api import OutboxRow, emit
from tenancy.contexts import OpContext
from workers.demo.models import Channel, Shipment, ShipmentNotice
from workqueue.api import Status, WorkItem

FINAL = {Status.DONE, Status.FAILED, Status.DISCARDED, Status.CANCELLED}


class ShipmentForm(forms.Form):
    reference = forms.CharField(max_length=100, help_text="Your reference, unique in your org.")
    recipient_email = forms.EmailField(label="Recipient's e-mail")
    channel = forms.ChoiceField(choices=Channel.choices, initial=Channel.EMAIL)

    def clean_reference(self) -> str:
        reference: str = self.cleaned_data["reference"].strip()
        if "\x00" in reference:
            raise forms.ValidationError("A reference cannot contain a NUL character.")
        return reference


def _member(request: HttpRequest) -> OpContext | None:
    return getattr(request, "op", None)


@login_required
def book(request: HttpRequest) -> HttpResponse:
    """GET: the form and the tenant's latest shipments. POST: book the shipment and enqueue
    its notice (through the outbox) in one transaction, then show the notice's progress."""
    op = _member(request)
    if op is None:
        return render(request, "demo/not_a_member.html", status=403)
    form = ShipmentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            # The view already runs in one transaction (the tenant scope); this savepoint lets
            # a taken reference roll back alone and come back as a form error.
            with transaction.atomic():
                shipment = Shipment.objects.create(
                    org_id=op.org_id,
                    reference=form.cleaned_data["reference"],
                    recipient_email=form.cleaned_data["recipient_email"],
                )
                work_id = emit(
                    op,
                    "work.NOTIFY_SHIPMENT",
                    {
                        "shipment_id": str(shipment.id),
                        "version": shipment.version,
                        "channel": form.cleaned_data["channel"],
                    },
                )
        except IntegrityError:
            form.add_error("reference", "A shipment with this reference exists in your org.")
        else:
            return redirect("demo-work", work_id=work_id)
    # Read in the member's tenant scope: row-level security shows this tenant's rows only.
    shipments = Shipment.objects.order_by("-created_at")[:10]
    return render(request, "demo/book.html", {"form": form, "shipments": shipments, "op": op})


@login_required
def work(request: HttpRequest, work_id: uuid.UUID) -> HttpResponse:
    """Where a booked shipment's notice is: its outbox row, then its work item, then the
    notice sent. The page re-reads itself every second until the work is final."""
    op = _member(request)
    if op is None:
        return render(request, "demo/not_a_member.html", status=403)
    row = OutboxRow.objects.filter(pk=work_id).first()
    item = WorkItem.objects.filter(pk=work_id).first()
    if item is not None:
        payload: dict[str, Any] = item.payload or {}
    elif row is not None:
        payload = row.payload or {}
    else:
        raise Http404("no such work in your org")
    shipment_id = payload.get("shipment_id")
    shipment = Shipment.objects.filter(pk=shipment_id).first() if shipment_id else None
    notices = ShipmentNotice.objects.filter(shipment=shipment) if shipment else []
    context = {
        "work_id": work_id,
        "row": row,
        "item": item,
        "shipment": shipment,
        "notices": list(notices),
        "final": item is not None and item.status in FINAL,
    }
    return render(request, "demo/work.html", context)
