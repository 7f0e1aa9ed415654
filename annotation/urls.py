"""Annotation pages; the REST routes live in annotation/api_urls.py under /api/."""

from django.urls import include, path

from . import adjudication_views, revision_views, views

urlpatterns = [
    path("api/", include("annotation.api_urls")),
    path("", views.home, name="home"),
    path("annotate/<id:study_id>/", views.annotate, name="annotate"),
    path("annotate/<id:study_id>/skip/", views.item_skip, name="item_skip"),
    path("annotate/<id:study_id>/flag/", views.item_flag, name="item_flag"),
    path("annotate/<id:study_id>/undo/", views.submission_undo, name="submission_undo"),
    path("annotate/<id:study_id>/qualification/retry/", views.qualification_retry, name="qualification_retry"),
    path("annotate/<id:study_id>/answers/", revision_views.answers, name="my_answers"),
    path("annotate/<id:study_id>/answers/<id:item_id>/", revision_views.answer_revise, name="answer_revise"),
    path("studies/new/", views.study_create, name="study_create"),
    path("studies/new/<str:kind>/", views.study_create, name="study_create_kind"),
    path("studies/<id:study_id>/quality/", views.study_quality, name="study_quality"),
    path("studies/<id:study_id>/quality/block/", views.annotator_block, name="annotator_block"),
    path("studies/<id:study_id>/quality/unblock/", views.annotator_unblock, name="annotator_unblock"),
    path("studies/<id:study_id>/quality/flags/<id:flag_id>/resolve/", views.flag_resolve, name="flag_resolve"),
    path("studies/<id:study_id>/quality/peer-reviews/", views.peer_review_sample, name="peer_review_sample"),
    path("studies/<id:study_id>/quality/designate/", views.items_designate, name="items_designate"),
    path("studies/<id:study_id>/adjudicate/", adjudication_views.study_adjudicate, name="study_adjudicate"),
    path("studies/<id:study_id>/adjudicate/next/", adjudication_views.adjudication_next, name="adjudication_next"),
    path(
        "studies/<id:study_id>/adjudicate/sample/", adjudication_views.adjudication_sample, name="adjudication_sample"
    ),
    path(
        "studies/<id:study_id>/adjudicate/reasons/",
        adjudication_views.adjudication_reasons,
        name="adjudication_reasons",
    ),
    path("adjudication/reasons/", adjudication_views.adjudication_global_reasons, name="adjudication_global_reasons"),
    path("studies/<id:study_id>/adjudicate/<id:item_id>/", adjudication_views.item_adjudicate, name="item_adjudicate"),
    path(
        "studies/<id:study_id>/adjudicate/<id:item_id>/send-back/",
        adjudication_views.item_send_back,
        name="item_send_back",
    ),
    path("studies/<id:study_id>/review/", views.peer_review, name="peer_review"),
]
