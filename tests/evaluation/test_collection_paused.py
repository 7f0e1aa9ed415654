"""The label routes build and write their whole-study payloads with the cyclic garbage collector
paused (evaluation.bulk), and it is on again after, however the work ends: answered, failed, or a
stream left half read."""

import gc

import pytest
from rest_framework.renderers import JSONRenderer

from evaluation import bulk, label_aggregation
from evaluation.bulk import collection_paused
from tests.factories import add_label_judgment, api_client, make_annotator, make_label_study, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def study():
    study = make_label_study(items=4, label_schema={"scale": "graded-0-2"})
    people = [make_annotator(name) for name in ("ann", "bea", "cal")]
    for item in study.items.order_by("position"):
        for index, person in enumerate(people):
            add_label_judgment(item, person, (item.position + index) % 3)
    return study


def collector_states(monkeypatch, owner, name) -> list[bool]:
    """Whether the collector was on at each call of owner.name."""
    states, original = [], getattr(owner, name)

    def recorded(*args, **kwargs):
        states.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, recorded)
    return states


def test_a_pause_inside_another_or_where_collection_is_off_leaves_it_as_found():
    assert gc.isenabled()
    with collection_paused():
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError, match="failed"), collection_paused():
        raise ValueError("failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_aggregate_payload_is_built_and_rendered_paused_and_collection_is_on_after(monkeypatch, study):
    built = collector_states(monkeypatch, label_aggregation, "provenance")
    rendered = collector_states(monkeypatch, JSONRenderer, "render")
    client = api_client(make_user("staff-reader", staff=True))
    response = client.get(f"/api/studies/{study.pk}/aggregate/?method=dawid-skene")
    assert response.status_code == 200 and response.json()["items"] == 4
    assert (built, rendered) == ([False], [False]) and gc.isenabled()
    assert client.get(f"/api/studies/{study.pk}/aggregate/?method=nope").status_code == 400
    assert gc.isenabled()


def test_a_soft_label_stream_read_whole_or_closed_half_read_turns_collection_back_on(monkeypatch, study):
    monkeypatch.setattr(bulk, "LINES_PER_CHUNK", 1)
    client = api_client(make_user("staff-reader", staff=True))
    whole = client.get(f"/api/studies/{study.pk}/soft-labels/")
    assert len(b"".join(whole.streaming_content).splitlines()) == 4 and gc.isenabled()
    response = client.get(f"/api/studies/{study.pk}/soft-labels/")
    chunks = iter(response.streaming_content)
    assert next(chunks).startswith(b'{"item"')
    assert not gc.isenabled()
    response.close()  # as the server does when the client goes away (last: it also ends the request)
    assert gc.isenabled()
