"""Who may work on a study, and how much: the rules behind the recruiting page and API.

A study is open to every annotator until staff name its annotators; naming narrows it to them
and to the accounts it was granted to personally (annotation.StudyGrant: invitations, crowd
participants, staff granting an existing account), who keep their access. Invited accounts work
on their granted studies only until staff widen them to every open study. The study's
per-annotator cap (`max_items_per_annotator`) and a crowd link's quota are separate limits; one
set below what somebody has already judged is refused with the numbers unless staff confirm
that those people stop where they are.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Q

from annotation.models import AnnotatorProfile, Assignment, Item, Judgment, Study, StudyGrant
from retrieval.errors import InputError

# How many of the people a refusal is about it names.
NAMED_IN_REFUSAL = 5


def formal_judgment_counts(study: Study, annotators=None) -> dict[str, int]:
    """Formal judgments each annotator gave in the study (voided ones too: the queue counts the
    work done), by username; only people with at least one, of `annotators` when given."""
    counts = {pk: n for pk, n in _formal_counts_by_id(study, annotators).items() if n}
    names = dict(get_user_model().objects.filter(pk__in=counts).values_list("pk", "username"))
    return {names[pk]: n for pk, n in counts.items()}


def _formal_counts_by_id(study: Study, annotators=None) -> dict[int, int]:
    """Annotator id -> formal judgments in the study, for everyone with a judgment there (0 for
    someone whose only ones are qualification items), of `annotators` when given: one grouped
    pass over an index of the study's judgments (annotation.models.Judgment), no join."""
    judgments = Judgment.objects.filter(study=study)  # the item's study, copied onto the judgment
    if annotators is not None:
        judgments = judgments.filter(annotator__in=annotators)
    formal = Count("pk", filter=~Q(item_role=Item.Role.QUALIFICATION))
    return dict(judgments.order_by().values_list("annotator").annotate(n=formal).values_list("annotator", "n"))


def refuse_below_done(counts: dict[str, int], limit: int, *, confirmed: bool, field: str, people: str) -> None:
    """InputError naming who has already judged more than `limit` (and how many), unless staff
    confirmed that they stop where they are."""
    over = sorted(((done, name) for name, done in counts.items() if done > limit), reverse=True)
    if not over or confirmed:
        return
    named = ", ".join(f"{name} {done}" for done, name in over[:NAMED_IN_REFUSAL])
    if len(over) > NAMED_IN_REFUSAL:
        named += f" and {len(over) - NAMED_IN_REFUSAL} more"
    who = f"1 {people.removesuffix('s')} has" if len(over) == 1 else f"{len(over)} {people} have"
    raise InputError(
        f"{limit} is below what {who} already judged ({named}): set at least {over[0][0]}, "
        "or confirm that they stop where they are",
        field=field,
    )


def set_recruiting(
    study: Study, *, annotators=None, max_items_per_annotator=..., confirm_below_done: bool = False
) -> Study:
    """Change who may work on a study (None: leave as is; empty: every annotator) and its
    per-annotator cap (None: no cap; left out: unchanged; below what someone has judged: refused
    unless `confirm_below_done`). Accounts the study was granted to keep their access."""
    if max_items_per_annotator not in (..., None):
        if max_items_per_annotator < 1:
            raise InputError("must be at least 1, or empty for no cap", field="max_items_per_annotator")
        refuse_below_done(
            formal_judgment_counts(study),
            max_items_per_annotator,
            confirmed=confirm_below_done,
            field="max_items_per_annotator",
            people="annotators",
        )
    with transaction.atomic():
        if max_items_per_annotator is not ...:
            study.max_items_per_annotator = max_items_per_annotator
            study.save(update_fields=["max_items_per_annotator"])
        if annotators is not None:
            study.annotators.set(annotators)
    return study


def workers(study: Study) -> list[dict]:
    """Everyone who has judged or holds a claim in the study and is not granted it: the people
    naming annotators can lock out (those granted it keep their access). Each with their id,
    name and formal judgments, most first."""
    counts = _formal_counts_by_id(study)  # everyone who judged here, in the pass that counts them
    claiming = Assignment.objects.filter(item__study=study, state=Assignment.State.ACTIVE).values("annotator")
    people = (
        get_user_model()
        .objects.filter(Q(pk__in=list(counts)) | Q(pk__in=claiming))
        .exclude(pk__in=StudyGrant.objects.filter(study=study).values("annotator"))
    )
    rows = [{"id": user.pk, "username": user.username, "judged": counts.get(user.pk, 0)} for user in people]
    return sorted(rows, key=lambda row: (-row["judged"], row["username"]))


def locked_out_by(study: Study, annotators) -> list[dict]:
    """Of `workers(study)`, those naming `annotators` would refuse (nobody when none is named)."""
    named = {user.pk for user in annotators}
    if not named:
        return []
    return [row for row in workers(study) if row["id"] not in named]


def _accounts(usernames: list[str]) -> list:
    """The accounts named, refusing unknown names and crowd participants (whose account belongs
    to their link's study alone)."""
    User = get_user_model()
    accounts = list(User.objects.filter(username__in=usernames).select_related("participant"))
    missing = sorted(set(usernames) - {user.username for user in accounts})
    if missing:
        raise InputError(f"no account {missing[0]!r}", field="username")
    crowd = sorted(user.username for user in accounts if hasattr(user, "participant"))
    if crowd:
        raise InputError(
            f"{crowd[0]} is a crowd participant: their account works on their link's study only", field="username"
        )
    return accounts


def grant_access(study: Study, usernames: list[str]) -> list:
    """Let existing accounts work on the study without naming them (an open study stays open)."""
    accounts = _accounts(usernames)
    StudyGrant.objects.bulk_create(
        [StudyGrant(study=study, annotator=user) for user in accounts], ignore_conflicts=True
    )
    return accounts


def set_only_granted(usernames: list[str], only_granted: bool) -> list:
    """Scope accounts to their granted studies (True) or widen them to every open study too."""
    accounts = _accounts(usernames)
    for user in accounts:
        AnnotatorProfile.objects.update_or_create(user=user, defaults={"only_granted": only_granted})
    return accounts


def granted_accounts(study: Study) -> list[dict]:
    """The accounts the study was granted to, crowd participants aside (the crowd link lists
    them): name, whether they work on their granted studies only, and those studies' names."""
    grants = (
        StudyGrant.objects.filter(study=study, annotator__participant__isnull=True)
        .select_related("annotator__annotator_profile")
        .order_by("annotator__username")
    )
    rows = []
    for grant in grants:
        user = grant.annotator
        profile = getattr(user, "annotator_profile", None)
        rows.append(
            {
                "username": user.username,
                "only_granted": bool(profile and profile.only_granted),
                "studies": sorted(user.study_grants.values_list("study__name", flat=True)),
            }
        )
    return rows
