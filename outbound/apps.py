from django.apps import AppConfig


class OutboundConfig(AppConfig):
    name = "outbound"
    verbose_name = "Outbound: guarded HTTP requests and sealed secrets"
