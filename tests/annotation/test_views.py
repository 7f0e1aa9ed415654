"""The annotation web pages through Django's test client: who may open what, the annotation
page without JavaScript (post, redirect, next item), and the staff pages to create a study,
follow it and void judgments."""

import re

import pytest
from django.urls import reverse

from annotation.models import Judgment, Study
from annotation.services import claim_next_item, submit_judgment
from tests.factories import (
    add_judgment,
    make_annotator,
    make_collection,
    make_neighbour_run,
    make_proxy_study,
    make_relic_collection,
    make_relic_proxy_study,
    make_run,
    make_user,
)

pytestmark = pytest.mark.django_db


def login(client, user):
    client.force_login(user)
    return client


def shown_item(response) -> int:
    """The item the annotation page asks about (its hidden form field)."""
    return int(re.search(r'name="item" value="(\d+)"', response.content.decode()).group(1))


def answer(client, study, response, position=0, seconds="12.5"):
    return client.post(
        reverse("annotate", args=[study.pk]), {"item": shown_item(response), "choice": position, "seconds": seconds}
    )


# --- who may open what ---------------------------------------------------------------------------


@pytest.mark.parametrize("url_name", ["home", "study_list", "study_create"])
def test_anonymous_visitors_are_sent_to_login(client, url_name):
    response = client.get(reverse(url_name))
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_anonymous_visitors_cannot_open_a_study_page(client):
    study = make_proxy_study(gold_positions=[0])
    for url in (reverse("annotate", args=[study.pk]), reverse("study_detail", args=[study.pk])):
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_annotators_cannot_open_staff_pages(client):
    study = make_proxy_study(gold_positions=[0])
    login(client, make_annotator())
    for url in (reverse("study_list"), reverse("study_create"), reverse("study_detail", args=[study.pk])):
        assert client.get(url).status_code == 403


def test_annotators_cannot_void_judgments(client):
    study = make_proxy_study(gold_positions=[0])
    judgment = add_judgment(study.items.get(), make_annotator(), 0)
    login(client, make_annotator())
    response = client.post(reverse("judgment_void", args=[study.pk, judgment.pk]), {"reason": "I dislike it"})
    assert response.status_code == 403
    judgment.refresh_from_db()
    assert not judgment.voided


def test_an_annotator_not_on_the_studys_list_gets_a_clear_message(client):
    allowed, outsider = make_annotator(), make_annotator()
    study = make_relic_proxy_study(2, annotators=[allowed])
    login(client, outsider)
    page = client.get(reverse("annotate", args=[study.pk]))
    assert page.status_code == 403
    assert "You cannot work on this study: you are not one of this study&#x27;s annotators." in page.content.decode()
    posted = client.post(reverse("annotate", args=[study.pk]), {"item": study.items.first().pk, "choice": 0})
    assert posted.status_code == 403
    assert not Judgment.objects.exists()


def test_a_blocked_annotator_gets_a_clear_message(client):
    study = make_relic_proxy_study(2)
    login(client, make_annotator(blocked=True))
    page = client.get(reverse("annotate", args=[study.pk]))
    assert page.status_code == 403
    assert "your account is blocked from annotation" in page.content.decode()


# --- home -----------------------------------------------------------------------------------------


def test_annotators_see_their_studies_with_progress_and_start_then_continue(client):
    annotator = make_annotator()
    mine = make_relic_proxy_study(3, annotators=[annotator], name="Mine")
    make_relic_proxy_study(2, annotators=[make_annotator()], name="Someone else's")
    login(client, annotator)

    home = client.get(reverse("home")).content.decode()
    assert "Mine" in home and "Someone else" not in home
    assert "0 / 3" in home and ">Start<" in home
    assert "/dashboard/" not in home

    answer(client, mine, client.get(reverse("annotate", args=[mine.pk])))
    home = client.get(reverse("home")).content.decode()
    assert "1 / 3" in home and ">Continue<" in home


def test_a_blocked_annotator_sees_why_instead_of_a_start_button(client):
    make_relic_proxy_study(2, name="Open to all")
    login(client, make_annotator(blocked=True))
    home = client.get(reverse("home")).content.decode()
    assert "Open to all" in home and "You cannot work on this study: your account is blocked" in home
    assert ">Start<" not in home


def test_staff_home_links_to_the_dashboard_and_the_studies(client):
    login(client, make_user(staff=True))
    home = client.get(reverse("home")).content.decode()
    assert 'href="/dashboard/"' in home and f'href="{reverse("study_list")}"' in home


# --- the annotation page without JavaScript -------------------------------------------------------


def test_the_page_shows_the_context_around_a_masked_quote_slot_and_numbered_candidates(client):
    study = make_relic_proxy_study(2, guidelines="Pick the sentence the critic quoted.")
    login(client, make_annotator())
    page = client.get(reverse("annotate", args=[study.pk])).content.decode()
    slot = page.index('<mark class="slot">[masked quote]</mark>')
    assert page.rindex("before the quotation.", 0, slot) < slot < page.index("after the quotation.", slot)
    assert [int(k) for k in re.findall(r'data-key="(\d)"', page)] == [1, 2, 3]
    assert "<summary>Guidelines</summary>" in page and "Pick the sentence the critic quoted." in page
    assert 'id="progress-text" class="progress-text">0 / 2<' in page


def test_a_plain_text_query_shows_its_own_mask_as_the_slot(client):
    study = make_proxy_study(gold_positions=[1])
    query = study.items.get().query
    query.text = "Before the gap. [masked sentence(s)] After the gap."
    query.save()
    login(client, make_annotator())
    page = client.get(reverse("annotate", args=[study.pk])).content.decode()
    assert 'Before the gap. <mark class="slot">[masked sentence(s)]</mark> After the gap.' in page


def test_more_than_nine_candidates_get_0_then_letters_as_keys(client):
    study = make_proxy_study(gold_positions=[4], candidates=12)
    login(client, make_annotator())
    page = client.get(reverse("annotate", args=[study.pk])).content.decode()
    assert re.findall(r'data-key="(\w)"', page) == list("1234567890ab")
    assert "1-9, 0 for 10, a-b for 11-12" in page


def test_posting_an_answer_stores_it_and_shows_the_next_item(client):
    annotator = make_annotator()
    study = make_relic_proxy_study(3)
    login(client, annotator)
    first = client.get(reverse("annotate", args=[study.pk]))
    response = answer(client, study, first, position=2, seconds="12.5")
    assert response.status_code == 302 and response.url == reverse("annotate", args=[study.pk])

    judgment = Judgment.objects.get(annotator=annotator)
    assert judgment.item_id == shown_item(first)
    assert judgment.choice.position == 2 and judgment.seconds == 12.5 and judgment.server_seconds is not None
    following = client.get(reverse("annotate", args=[study.pk]))
    assert shown_item(following) != shown_item(first)
    assert ">1 / 3<" in following.content.decode()


def test_coming_back_shows_the_same_claimed_item(client):
    study = make_relic_proxy_study(3)
    login(client, make_annotator())
    first = shown_item(client.get(reverse("annotate", args=[study.pk])))
    assert shown_item(client.get(reverse("annotate", args=[study.pk]))) == first


def test_an_answer_without_a_choice_is_refused_with_a_message(client):
    annotator = make_annotator()
    study = make_relic_proxy_study(2)
    login(client, annotator)
    page = client.get(reverse("annotate", args=[study.pk]))
    response = client.post(reverse("annotate", args=[study.pk]), {"item": shown_item(page)}, follow=True)
    assert "Choose one of the candidates before submitting." in response.content.decode()
    assert shown_item(response) == shown_item(page)
    assert not Judgment.objects.exists()


def test_posting_the_same_item_twice_keeps_the_first_answer(client):
    annotator = make_annotator()
    study = make_relic_proxy_study(2)
    login(client, annotator)
    page = client.get(reverse("annotate", args=[study.pk]))
    answer(client, study, page, position=0)
    again = client.post(reverse("annotate", args=[study.pk]), {"item": shown_item(page), "choice": 1}, follow=True)
    assert "You had already answered that item; your first answer stands." in again.content.decode()
    assert Judgment.objects.get(annotator=annotator).choice.position == 0


def test_a_broken_timer_does_not_cost_the_answer(client):
    annotator = make_annotator()
    study = make_relic_proxy_study(2)
    login(client, annotator)
    answer(client, study, client.get(reverse("annotate", args=[study.pk])), seconds="NaN")
    assert Judgment.objects.get(annotator=annotator).seconds is None


def test_a_finished_study_says_so(client):
    annotator = make_annotator()
    study = make_relic_proxy_study(2)
    login(client, annotator)
    for _ in range(2):
        answer(client, study, client.get(reverse("annotate", args=[study.pk])))
    page = client.get(reverse("annotate", args=[study.pk])).content.decode()
    assert "You have finished this study." in page and "You judged all 2 items." in page
    assert 'id="judgment-form"' not in page


def test_nothing_left_because_others_completed_the_items_says_so(client):
    study = make_relic_proxy_study(1, judgments_per_item=1)
    other = make_annotator()
    login(client, other)
    answer(client, study, client.get(reverse("annotate", args=[study.pk])))
    login(client, make_annotator())
    page = client.get(reverse("annotate", args=[study.pk])).content.decode()
    assert "Nothing left for you in this study." in page


def test_a_closed_study_says_so(client):
    study = make_relic_proxy_study(2)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    login(client, make_annotator())
    assert "This study is closed." in client.get(reverse("annotate", args=[study.pk])).content.decode()


# --- staff pages ----------------------------------------------------------------------------------


def test_the_study_list_shows_judgments_done_out_of_needed(client):
    study = make_relic_proxy_study(3, judgments_per_item=2)
    annotator = make_annotator()
    login(client, annotator)
    answer(client, study, client.get(reverse("annotate", args=[study.pk])))
    login(client, make_user(staff=True))
    page = client.get(reverse("study_list")).content.decode()
    assert study.name in page and "1 / 6" in page
    assert f'href="/studies/{study.pk}/report/"' in page


def study_form_data(collection, run, **changes):
    return {
        "name": "Pride proxy",
        "collection": collection.pk,
        "negatives_run": run.pk,
        "items": 3,
        "candidates": 3,
        "judgments_per_item": 3,
        "seed": 11,
        "context_left": 4,
        "context_right": 2,
        "guidelines": "Choose well.",
        "claim_minutes": 30,
        **changes,
    }


def test_staff_create_a_proxy_study_through_the_form(client):
    collection = make_relic_collection(4)
    run = make_neighbour_run(collection)
    reader = make_annotator("reader")
    login(client, make_user(staff=True))
    response = client.post(
        reverse("study_create"), study_form_data(collection, run, annotators=[reader.pk], single_sentence="on")
    )
    study = Study.objects.get(name="Pride proxy")
    assert response.status_code == 302 and response.url == reverse("study_detail", args=[study.pk])
    assert (study.items.count(), study.candidates_per_item, study.seed, study.context_right) == (3, 3, 11, 2)
    assert list(study.annotators.all()) == [reader] and study.parameters["single_sentence"] is True
    detail = client.get(response.url).content.decode()
    assert "created with 3 items" in detail


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"candidates": 21}, "candidates", "less than or equal to 20"),
        ({"candidates": 1}, "candidates", "greater than or equal to 2"),
        ({"items": 0}, "items", "greater than or equal to 1"),
    ],
)
def test_the_study_form_shows_range_errors_under_their_field(client, changes, field, message):
    collection = make_relic_collection(2)
    run = make_neighbour_run(collection)
    login(client, make_user(staff=True))
    response = client.post(reverse("study_create"), study_form_data(collection, run, **changes))
    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors[field])
    assert message in response.content.decode()
    assert not Study.objects.exists()


def test_the_study_form_shows_the_services_refusal_under_the_field_it_names(client):
    collection = make_relic_collection(2)
    other_run = make_run(make_collection())
    login(client, make_user(staff=True))
    response = client.post(reverse("study_create"), study_form_data(collection, other_run))
    assert response.status_code == 200
    assert "ranks collection" in " ".join(response.context["form"].errors["negatives_run"])
    assert not Study.objects.exists()


def test_staff_see_each_items_judgments_and_void_one_with_a_reason(client):
    study = make_relic_proxy_study(2)
    annotator = make_annotator("ann")
    item = study.items.first()
    login(client, annotator)
    answer(client, study, client.get(reverse("annotate", args=[study.pk])), position=1)
    judgment = Judgment.objects.get()
    login(client, make_user(staff=True))

    detail = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert f'id="item-{judgment.item_id}"' in detail and "<strong>ann</strong> chose 2" in detail
    void_url = reverse("judgment_void", args=[study.pk, judgment.pk])
    assert f'action="{void_url}"' in detail and item.query.external_id in detail
    assert f'href="/studies/{study.pk}/report/"' in detail

    refused = client.post(void_url, {"reason": "  "}, follow=True)
    assert "a reason is required" in refused.content.decode()
    judgment.refresh_from_db()
    assert not judgment.voided

    response = client.post(void_url, {"reason": "answered at random"})
    assert response.status_code == 302 and response.url.endswith(f"#item-{judgment.item_id}")
    judgment.refresh_from_db()
    assert judgment.voided and judgment.void_reason == "answered at random"
    detail = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert "voided by" in detail and "answered at random" in detail


def test_a_judgment_of_another_study_cannot_be_voided_through_this_one(client):
    study, other = make_relic_proxy_study(1), make_relic_proxy_study(1)
    annotator = make_annotator()
    item = other.items.get()
    claim_next_item(other, annotator)
    judgment = submit_judgment(annotator=annotator, item=item, position=0).judgment
    login(client, make_user(staff=True))
    response = client.post(reverse("judgment_void", args=[study.pk, judgment.pk]), {"reason": "wrong study"})
    assert response.status_code == 404
