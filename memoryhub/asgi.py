import os

from django.core.asgi import get_asgi_application

from memoryhub.celery import warn_if_tasks_run_in_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
application = get_asgi_application()
warn_if_tasks_run_in_process()
