import os

from django.core.wsgi import get_wsgi_application

from memoryhub.celery import warn_if_tasks_run_in_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
application = get_wsgi_application()
warn_if_tasks_run_in_process()
