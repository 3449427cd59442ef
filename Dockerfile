FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MEMORYHUB_DATA_DIR=/var/lib/memoryhub
WORKDIR /app

COPY pyproject.toml README.md ./
# The one package pyproject installs (the `memoryhub` client command); the apps run from /app.
COPY memoryhub_client ./memoryhub_client
RUN pip install --no-cache-dir -e . && useradd --system --home /app memoryhub \
    && mkdir -p /var/lib/memoryhub && chown memoryhub /var/lib/memoryhub
COPY . .
# collectstatic reads settings; a throwaway key and an unreachable database are enough.
RUN SECRET_KEY=build MEMORYHUB_VAULT_KEY=$(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())') \
    DATABASE_URL=postgres://build@127.0.0.1:1/build python manage.py collectstatic --noinput

USER memoryhub
EXPOSE 8000
CMD ["gunicorn", "memoryhub.wsgi", "-c", "python:memoryhub.gunicorn_conf", "--bind", "0.0.0.0:8000"]
