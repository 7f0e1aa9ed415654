from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation: studies and judgments"

    def ready(self):
        from . import signals  # noqa: F401  (connects the receivers)
