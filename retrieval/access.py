"""Who may see staff pages. Lives in retrieval, the base app, so that every app's pages share
one rule (annotation and evaluation may import retrieval, never the other way round)."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied


def staff_required(view):
    """Signed-out visitors go to the login page; signed-in non-staff get 403."""

    @login_required
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied("staff only")
        return view(request, *args, **kwargs)

    return guarded
