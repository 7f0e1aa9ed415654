"""The system checks a data command runs (imports, exports, runs, retries): all but the
URLconf's.

Loading the URLconf loads every view, serializer and the API schema (DRF, drf-spectacular,
numpy): about 0.4 s of each command's start, and no import, export or run reads a URL.
`manage.py check`, `runserver`, the web processes and the test suite still check the URLconf,
as Django's own `migrate` runs only the checks it needs.
"""

from django.core.checks import Tags

DATA_COMMAND_CHECKS = [value for name, value in vars(Tags).items() if not name.startswith("_") and value != Tags.urls]
