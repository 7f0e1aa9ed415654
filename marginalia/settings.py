"""Marginalia settings, read entirely from environment variables with safe local defaults.

Local default: SQLite next to the code, Redis on localhost (the run script starts one), plain
HTTP on localhost with a built-in key, and DEBUG off: an error page never shows a traceback to
whoever caused it. A developer who wants Django's debug pages asks: DJANGO_DEBUG=1 or
MARGINALIA_DEBUG=1. Production: set DJANGO_DEBUG=0, DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS,
DATABASE_URL, REDIS_URL; then the security settings below make `manage.py check --deploy` pass.
"""

import os
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url

from marginalia.converters import LARGEST_ID

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# DJANGO_DEBUG=0 declares a production deployment; unset, the platform runs locally.
PRODUCTION = not env_bool("DJANGO_DEBUG", True)
DEBUG = not PRODUCTION and (env_bool("DJANGO_DEBUG", False) or env_bool("MARGINALIA_DEBUG", False))
_INSECURE_DEV_KEY = "django-insecure-marginalia-local-development-only-key-change-me-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "" if PRODUCTION else _INSECURE_DEV_KEY)
if not SECRET_KEY:
    raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off.")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "" if PRODUCTION else "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "axes",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc served from our static files, no CDN
    "outbound",
    "jobs",
    "retrieval",
    "annotation",
    "evaluation",
    "console",
    "integrations",
    "judges",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
    "jobs.middleware.BrokerUnavailableMiddleware",
]

ROOT_URLCONF = "marginalia.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
WSGI_APPLICATION = "marginalia.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        # Keep a connection per worker for a minute (opening one per request is a large share of
        # a short request on Postgres); health checks drop one the server closed meanwhile.
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker, commands) share the file: wait for locks instead of failing.
    # WAL lets readers go on while one writer commits; synchronous FULL keeps every committed
    # judgment through a power cut (NORMAL is faster and survives crashes of the app, not of the
    # machine).
    SQLITE_SYNCHRONOUS = os.environ.get("MARGINALIA_SQLITE_SYNCHRONOUS", "FULL").upper()
    if SQLITE_SYNCHRONOUS not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise RuntimeError("MARGINALIA_SQLITE_SYNCHRONOUS must be OFF, NORMAL, FULL or EXTRA.")
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": f"PRAGMA journal_mode=WAL;PRAGMA synchronous={SQLITE_SYNCHRONOUS}",
        }
    )
    # Test runs get a file of their own (not shared-cache memory, where concurrent threads fail
    # with "table is locked" instead of waiting), one per process so parallel runs never meet.
    DATABASES["default"]["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"marginalia-test-{os.getpid()}.sqlite3")
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes, attempts kept in the database so every web process sees them;
# marginalia/lockout.py): after MARGINALIA_LOGIN_FAILURE_LIMIT wrong passwords for one account
# from one address, sign-in there (/accounts/login/, /admin/login/, the token endpoint) is refused
# with a 429 "too many attempts" page, even with the right password, until
# MARGINALIA_LOGIN_COOLOFF_MINUTES pass; past the limit, failures of an account from all addresses
# (not counted from an address it signed in from before) or of an address on all accounts impose a
# wait of MARGINALIA_LOGIN_DELAY_SECONDS doubling with each further failure. A success clears the
# pair's count. Addresses are REMOTE_ADDR; behind N reverse proxies set MARGINALIA_PROXY_COUNT=N
# to read X-Forwarded-For instead (never trust it otherwise: it is the client's to forge).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("MARGINALIA_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("MARGINALIA_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "marginalia.lockout.ProgressiveLockoutHandler"
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # hammering during a lock or wait does not extend it
MARGINALIA_LOGIN_DELAY_SECONDS = float(os.environ.get("MARGINALIA_LOGIN_DELAY_SECONDS", "1"))
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_IPWARE_PROXY_COUNT = int(os.environ.get("MARGINALIA_PROXY_COUNT", "0"))
AXES_IPWARE_META_PRECEDENCE_ORDER = (
    ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR") if AXES_IPWARE_PROXY_COUNT else ("REMOTE_ADDR",)
)
# Sessions end MARGINALIA_SESSION_HOURS after sign-in; API tokens MARGINALIA_TOKEN_DAYS after
# they were issued (marginalia/authentication.py).
SESSION_COOKIE_AGE = int(os.environ.get("MARGINALIA_SESSION_HOURS", "12")) * 3600
TOKEN_MAX_AGE = timedelta(days=int(os.environ.get("MARGINALIA_TOKEN_DAYS", "30")))
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("DJANGO_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# Locally WhiteNoise serves static files straight from the apps (runserver does so only in DEBUG).
WHITENOISE_USE_FINDERS = not PRODUCTION

# Where models, embedding caches and other artifacts live; shared between web and workers.
MARGINALIA_DATA_DIR = Path(os.environ.get("MARGINALIA_DATA_DIR", BASE_DIR / "var"))
# Studies with at least this many items get their report from a worker job, not the request.
MARGINALIA_REPORT_JOB_ITEMS = int(os.environ.get("MARGINALIA_REPORT_JOB_ITEMS", "20000"))
# Reports fit MACE and GLAD beside majority and Dawid-Skene only up to this many counted
# judgments (they cost ~10x Dawid-Skene); aggregate_labels fits any method at any size.
MARGINALIA_REPORT_COMPETENCE_JUDGMENTS = int(os.environ.get("MARGINALIA_REPORT_COMPETENCE_JUDGMENTS", "20000"))
# How often Celery beat has a worker check agreement thresholds (evaluation.alerts).
MARGINALIA_AGREEMENT_WATCH_SECONDS = float(os.environ.get("MARGINALIA_AGREEMENT_WATCH_SECONDS", "300"))
MARGINALIA_DENSE_MODEL = os.environ.get("MARGINALIA_DENSE_MODEL", "")  # empty: the bundled MiniLM
# Coverage: a run whose mean Judged@k under a judged pool's qrels is below this share gets a
# warning beside its metrics (run page, evaluate_run, leaderboards); each call may set its own.
MARGINALIA_COVERAGE_THRESHOLD = float(os.environ.get("MARGINALIA_COVERAGE_THRESHOLD", "0.9"))
# A running job with no progress report for this long is failed: its worker is gone.
MARGINALIA_STALE_JOB_MINUTES = float(os.environ.get("MARGINALIA_STALE_JOB_MINUTES", "30"))
# How often Celery beat sweeps for such jobs (jobs.tasks.sweep_stale_jobs).
MARGINALIA_SWEEP_SECONDS = float(os.environ.get("MARGINALIA_SWEEP_SECONDS", "60"))
# Queueing work refuses (HTTP 503, a command error) when the broker does not answer this fast.
MARGINALIA_BROKER_TIMEOUT_SECONDS = float(os.environ.get("MARGINALIA_BROKER_TIMEOUT_SECONDS", "3"))
# A run queued on workers is split into this many shards (at most; fewer for small runs), so
# that as many workers share it; a failed or lost shard is retried alone this many times.
MARGINALIA_RUN_SHARDS = int(os.environ.get("MARGINALIA_RUN_SHARDS", "8"))
MARGINALIA_SHARD_RETRIES = int(os.environ.get("MARGINALIA_SHARD_RETRIES", "2"))
# Uploads from the dashboard and /api/uploads/ (console/uploads.py): the largest file accepted, and
# for archives (a BEIR folder as .zip / .tar.gz) what they may unpack to.
MARGINALIA_UPLOAD_MAX_BYTES = int(os.environ.get("MARGINALIA_UPLOAD_MAX_BYTES", str(200 * 1024 * 1024)))
MARGINALIA_UPLOAD_MAX_EXTRACTED_BYTES = int(
    os.environ.get("MARGINALIA_UPLOAD_MAX_EXTRACTED_BYTES", str(2 * 1024 * 1024 * 1024))
)
MARGINALIA_UPLOAD_MAX_ARCHIVE_ENTRIES = int(os.environ.get("MARGINALIA_UPLOAD_MAX_ARCHIVE_ENTRIES", "10000"))
MARGINALIA_UPLOAD_MAX_COMPRESSION_RATIO = float(os.environ.get("MARGINALIA_UPLOAD_MAX_COMPRESSION_RATIO", "200"))

# Integrations (integrations/): the platform's public address, the base of every link it hands
# out, web and command line (marginalia/public_address.py; empty: the address a request came to,
# else the one run_platform was started on); how long an invitation link works; how many
# seconds a finished crowd participant sees their completion code before being sent back to the
# recruiting platform (negative: never sent automatically); and how many new participants a
# crowd link takes per minute, and one address per hour, before answering 429.
MARGINALIA_BASE_URL = os.environ.get("MARGINALIA_BASE_URL", "")
MARGINALIA_INVITATION_DAYS = int(os.environ.get("MARGINALIA_INVITATION_DAYS", "14"))
_crowd_redirect = int(os.environ.get("MARGINALIA_CROWD_REDIRECT_SECONDS", "5"))
MARGINALIA_CROWD_REDIRECT_SECONDS = _crowd_redirect if _crowd_redirect >= 0 else None
MARGINALIA_CROWD_NEW_PER_LINK_PER_MINUTE = int(os.environ.get("MARGINALIA_CROWD_NEW_PER_LINK_PER_MINUTE", "120"))
MARGINALIA_CROWD_NEW_PER_ADDRESS_PER_HOUR = int(os.environ.get("MARGINALIA_CROWD_NEW_PER_ADDRESS_PER_HOUR", "10"))

# Requests out of the platform (judge endpoints, webhooks: outbound/) go only to public addresses,
# plus these host names, addresses and CIDR networks (e.g. a model server on the local network:
# "127.0.0.1,10.0.5.0/24,llm.internal"); cloud metadata services are refused whatever it lists.
MARGINALIA_OUTBOUND_ALLOW = env_list("MARGINALIA_OUTBOUND_ALLOW", "")
# Keys that seal stored secrets (judge API keys, webhook signing secrets; outbound/sealing.py):
# comma-separated Fernet keys, the first seals and all open (rotation: new key first, then
# `manage.py reseal_secrets`, then drop the old one). DJANGO_SECRET_KEY stands for a key derived
# from Django's SECRET_KEY, the default.
MARGINALIA_SECRETS_KEY = env_list("MARGINALIA_SECRETS_KEY", "DJANGO_SECRET_KEY")
# Judges read an API key from a registered judge secret (POST /api/judge-secrets/); reading one
# from an environment variable (`api_key_env`, judges registered before secrets existed) works only
# for the variable names listed here, and never for the platform's own (DJANGO_*, DATABASE_*, ...).
MARGINALIA_JUDGE_KEY_ENVS = env_list("MARGINALIA_JUDGE_KEY_ENVS", "")

# Webhooks (integrations/services/): a failed delivery is retried after BACKOFF x 2^(attempt-1)
# seconds (capped), MAX_ATTEMPTS in all. ALLOW_PRIVATE (kept from before MARGINALIA_OUTBOUND_ALLOW)
# lets webhooks, and only them, reach loopback and private networks (never link-local, metadata).
MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = env_bool("MARGINALIA_WEBHOOKS_ALLOW_PRIVATE", False)
MARGINALIA_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("MARGINALIA_WEBHOOK_TIMEOUT_SECONDS", "10"))
MARGINALIA_WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("MARGINALIA_WEBHOOK_MAX_ATTEMPTS", "10"))
MARGINALIA_WEBHOOK_BACKOFF_SECONDS = float(os.environ.get("MARGINALIA_WEBHOOK_BACKOFF_SECONDS", "30"))
MARGINALIA_WEBHOOK_BACKOFF_MAX_SECONDS = float(os.environ.get("MARGINALIA_WEBHOOK_BACKOFF_MAX_SECONDS", "3600"))

# export_dataset: more answer sources for a study's dataset (dotted paths of callables
# `source(study) -> {item id: [answer dicts]}`, e.g. an LLM judge's answers), comma-separated.
MARGINALIA_DATASET_ANSWER_SOURCES = env_list("MARGINALIA_DATASET_ANSWER_SOURCES", "")

# E-mail (invitations): printed on the console unless an SMTP host is configured.
EMAIL_HOST = os.environ.get("DJANGO_EMAIL_HOST", "")
EMAIL_BACKEND = os.environ.get(
    "DJANGO_EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = int(os.environ.get("DJANGO_EMAIL_PORT", "587"))
EMAIL_HOST_USER = os.environ.get("DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("DJANGO_EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = os.environ.get("DJANGO_DEFAULT_FROM_EMAIL", "marginalia@localhost")
# Judges: the prompt templates (one file per study kind) and the most seconds to wait when an
# endpoint answers 429 with a longer Retry-After.
MARGINALIA_JUDGE_PROMPTS_DIR = Path(os.environ.get("MARGINALIA_JUDGE_PROMPTS_DIR", BASE_DIR / "judges" / "prompts"))
MARGINALIA_JUDGE_MAX_RETRY_WAIT = float(os.environ.get("MARGINALIA_JUDGE_MAX_RETRY_WAIT", "60"))
# An annotator may take back their last answer this many seconds after submitting it (0: never).
MARGINALIA_UNDO_SECONDS = float(os.environ.get("MARGINALIA_UNDO_SECONDS", "10"))
# A run scores at most this many (query, passage) cells at once: 8 bytes each, 64 MB by default.
MARGINALIA_SCORE_CELLS = int(os.environ.get("MARGINALIA_SCORE_CELLS", str(1 << 23)))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "marginalia.authentication.ExpiringTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON bodies under the same input rules as imported files (retrieval/input_rules.py).
    "DEFAULT_PARSER_CLASSES": [
        "retrieval.parsers.GuardedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "retrieval.api.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
}
# POST /api/auth/token/ (integrations.api.TokenView): attempts per client address, counted once for
# all web processes in Redis (marginalia/throttling.py; each process alone while it does not answer).
REST_FRAMEWORK.setdefault("DEFAULT_THROTTLE_RATES", {})["token"] = os.environ.get("MARGINALIA_TOKEN_RATE", "30/min")
SPECTACULAR_SETTINGS = {
    "TITLE": "Marginalia API",
    "VERSION": "1.0.0",
    # `<id:...>` path parameters (marginalia.converters): ids a database can hold.
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "format": "int64", "minimum": 0, "maximum": LARGEST_ID}},
    # Several models have a "kind" or "status" choice set; name each one after its model.
    "ENUM_NAME_OVERRIDES": {
        "CollectionKindEnum": "retrieval.models.Collection.Kind",
        "RetrieverKindEnum": "retrieval.models.Retriever.Kind",
        "JobStatusEnum": "jobs.models.Job.Status",
        "RunStatusEnum": "retrieval.models.Run.Status",
        "StudyKindEnum": "annotation.models.Study.Kind",
        "StudyStatusEnum": "annotation.models.Study.Status",
    },
    # /api/docs/ loads Swagger UI from drf-spectacular-sidecar's static files (no CDN).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
}

# Celery: one app, three queues (marginalia/celery.py): short work on "cpu", long work without a
# GPU on "long" (endpoint judges), encoding, training and local judges on "gpu".
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
# Where request rates are counted for every web process (marginalia/throttling.py).
MARGINALIA_RATE_LIMIT_URL = os.environ.get("MARGINALIA_RATE_LIMIT_URL", REDIS_URL)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
# A worker killed mid-task fails that task (recorded on its Job) instead of silently re-running it.
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = int(os.environ.get("CELERY_TASK_TIME_LIMIT", str(6 * 3600)))
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("CELERY_TASK_SOFT_TIME_LIMIT", str(6 * 3600 - 60)))
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Every broker operation has a deadline: connecting, and each read or write on a connection. A
# broker that accepts connections but never answers (a frozen Redis) is then refused as quickly
# as one that is down, instead of holding a request or command forever. Sending is one attempt
# (jobs.services): a refused send fails the job, or leaves a webhook's outbox row to redelivery.
CELERY_BROKER_CONNECTION_TIMEOUT = MARGINALIA_BROKER_TIMEOUT_SECONDS
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_timeout": MARGINALIA_BROKER_TIMEOUT_SECONDS,
    "socket_connect_timeout": MARGINALIA_BROKER_TIMEOUT_SECONDS,
}
CELERY_REDIS_SOCKET_TIMEOUT = MARGINALIA_BROKER_TIMEOUT_SECONDS
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = MARGINALIA_BROKER_TIMEOUT_SECONDS
CELERY_TASK_PUBLISH_RETRY = False
# Periodic tasks, run by celery beat (run_platform starts it; docker-compose's beat service).
CELERY_BEAT_SCHEDULE = {
    # Jobs whose worker died (no heartbeat for MARGINALIA_STALE_JOB_MINUTES) fail or retry.
    "sweep-stale-jobs": {"task": "jobs.tasks.sweep_stale_jobs", "schedule": MARGINALIA_SWEEP_SECONDS},
    # Webhook deliveries that are due (broker or receiver was down).
    # Agreement thresholds of studies whose judgments grew by a batch since the last check.
    "evaluation-watch-agreement": {
        "task": "evaluation.tasks.watch_agreement",
        "schedule": MARGINALIA_AGREEMENT_WATCH_SECONDS,
    },
    "integrations-redeliver-webhooks": {
        "task": "integrations.tasks.redeliver_webhooks",
        "schedule": float(os.environ.get("MARGINALIA_WEBHOOK_REDELIVERY_SECONDS", "60")),
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO")},
}

if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
