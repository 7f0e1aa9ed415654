"""The recruiting migrations on data written before them: a crowd link keeps its quota (copied
from the study's cap it used to share, the cap left as it was), a participant bound to a study
keeps exactly that study with the quota, is bound to their session by its digest and renamed
"Participant-N"; an invited account is scoped to the studies it was invited to, that name it or
that it worked on. And back again."""

import hashlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("annotation", "0005_annotator_skip_flag_undo_context"), ("integrations", "0001_recruiting_and_webhooks")]
AFTER = [("annotation", "0006_recruiting_study_grants"), ("integrations", "0003_recruiting_crowd_identities")]


def migrate(targets=None):
    """To `targets`, or (None) back to the latest of every app, as the other tests expect."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_world():
    """Rows as the platform wrote them before these migrations; the latest schema afterwards."""
    apps = migrate(BEFORE)
    User = apps.get_model("auth", "User")
    Collection = apps.get_model("retrieval", "Collection")
    Study = apps.get_model("annotation", "Study")
    AnnotatorProfile = apps.get_model("annotation", "AnnotatorProfile")
    collection = Collection.objects.create(name="c", kind="beir")
    crowd_study = Study.objects.create(name="crowd", kind="proxy", collection=collection, max_items_per_annotator=4)
    invited_study = Study.objects.create(name="invited", kind="proxy", collection=collection)
    named_study = Study.objects.create(name="named", kind="proxy", collection=collection)
    Study.objects.create(name="elsewhere", kind="proxy", collection=collection)
    worker = User.objects.create(username="crowd-1-5f0c1a2b")
    AnnotatorProfile.objects.create(user=worker, only_study=crowd_study)
    link = apps.get_model("integrations", "CrowdLink").objects.create(
        study=crowd_study, slug="slug", completion_code="C"
    )
    participant = apps.get_model("integrations", "Participant").objects.create(
        link=link, external_id="5f0c1a2b", session="SESSION-1", user=worker
    )
    scholar = User.objects.create(username="scholar")
    named_study.annotators.add(scholar)
    invitation = apps.get_model("integrations", "Invitation").objects.create(
        token_digest="d" * 64, expires_at="2030-01-01T00:00Z", accepted_by=scholar
    )
    invitation.studies.add(invited_study)
    yield {"link": link.pk, "participant": participant.pk, "worker": worker.pk, "scholar": scholar.pk}
    migrate()  # the latest schema again, whatever the test did


def test_the_migrations_keep_quotas_bindings_and_access(old_world):
    apps = migrate(AFTER)
    link = apps.get_model("integrations", "CrowdLink").objects.get(pk=old_world["link"])
    assert link.quota == 4 and link.study.max_items_per_annotator == 4
    participant = apps.get_model("integrations", "Participant").objects.get(pk=old_world["participant"])
    assert participant.session_digest == hashlib.sha256(b"SESSION-1").hexdigest()
    assert participant.user.username == f"Participant-{participant.pk}"
    Grant = apps.get_model("annotation", "StudyGrant")
    Profile = apps.get_model("annotation", "AnnotatorProfile")
    assert list(Grant.objects.filter(annotator_id=old_world["worker"]).values_list("study__name", "item_quota")) == [
        ("crowd", 4)
    ]
    assert Profile.objects.get(user_id=old_world["worker"]).only_granted
    scholar_grants = Grant.objects.filter(annotator_id=old_world["scholar"]).values_list("study__name", flat=True)
    assert sorted(scholar_grants) == ["invited", "named"]
    assert Profile.objects.get(user_id=old_world["scholar"]).only_granted

    apps = migrate(BEFORE)
    link = apps.get_model("integrations", "CrowdLink").objects.get(pk=old_world["link"])
    assert link.study.max_items_per_annotator == 4
    Profile = apps.get_model("annotation", "AnnotatorProfile")
    assert Profile.objects.get(user_id=old_world["worker"]).only_study.name == "crowd"
    assert apps.get_model("auth", "User").objects.get(pk=old_world["worker"]).username == f"crowd-{link.pk}-5f0c1a2b"
