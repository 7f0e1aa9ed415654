"""The system checks a data command runs (imports, exports, runs, retries): those about the data
and the machinery it uses — models, database, migrations, caches, files, translation, signals.

The others check what only the web serves, and several are costly: the URLconf's load every
view, serializer and the API schema (about 0.4 s), the templates' and the admin's build the
template engines, which import every app's template tag library and the services behind them
(about 0.3 s), and DRF's pagination check imports its serializers, and with them psycopg and
django.contrib.postgres (about 0.35 s). `manage.py check`, `runserver`, the web processes and
the test suite still run them all, as Django's own `migrate` runs only the checks it needs.
"""

from django.core.checks import Tags

DATA_COMMAND_CHECKS = [
    Tags.models,
    Tags.database,
    Tags.commands,
    Tags.caches,
    Tags.files,
    Tags.translation,
    Tags.signals,
    Tags.async_support,
]
