"""The admin shows every annotation record to superusers, and lets nobody rewrite judgments."""

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Judgment
from annotation.services import claim_next_item, submit_judgment
from tests.factories import make_annotator, make_relic_proxy_study

pytestmark = pytest.mark.django_db


def test_admin_pages_open_and_judgments_are_read_only(client):
    study = make_relic_proxy_study(1)
    annotator = make_annotator()
    assignment = claim_next_item(study, annotator)
    judgment = submit_judgment(annotator=annotator, item=assignment.item, position=0).judgment
    admin = get_user_model().objects.create_superuser("root", password="pw-for-tests")
    client.force_login(admin)
    for model in ("study", "item", "assignment", "judgment", "annotatorprofile"):
        assert client.get(f"/admin/annotation/{model}/").status_code == 200
    assert client.get(f"/admin/annotation/item/{assignment.item.pk}/change/").status_code == 200
    page = client.get(f"/admin/annotation/judgment/{judgment.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert client.post(f"/admin/annotation/judgment/{judgment.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Judgment.objects.filter(pk=judgment.pk).exists()
