"""`{% item_flags study %}`: the staff table of flags annotators raised on a study's items, so any
staff page can show it with one line (it reads them itself through selectors.item_flags). A page
shows the first FLAGS_SHOWN and links to the data manager's flagged items for the rest: a 100K-item
study may hold thousands of flags, and listing them all cost the study page a third of its time."""

from django import template

from ..models import ItemFlag
from ..selectors import item_flags as study_item_flags

register = template.Library()

FLAGS_SHOWN = 50


@register.inclusion_tag("annotation/_item_flags.html")
def item_flags(study) -> dict:
    flags = study_item_flags(study, limit=FLAGS_SHOWN)
    total = len(flags) if len(flags) < FLAGS_SHOWN else ItemFlag.objects.filter(item__study=study).count()
    return {"study": study, "flags": flags, "total": total}
