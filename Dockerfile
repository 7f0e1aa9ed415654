# One Dockerfile, two runtime targets that share everything but their base and torch build:
#   cpu  (python:3.11-slim)                 web server and the CPU worker
#   gpu  (nvidia/cuda runtime + Python 3.11) the GPU worker; torch from PyTorch's CUDA wheel index
# docker compose builds each service's target (see docker-compose.yml).

ARG TORCH_VERSION=2.13.0
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_CUDA_INDEX=https://download.pytorch.org/whl/cu128

# --- cpu -----------------------------------------------------------------------------------------
FROM python:3.11-slim AS cpu
ARG TORCH_VERSION
ARG TORCH_CPU_INDEX
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MARGINALIA_DATA_DIR=/data
WORKDIR /app
# torch first, from the CPU index: PyPI's Linux wheels would pull the CUDA libraries.
RUN pip install --extra-index-url "$TORCH_CPU_INDEX" "torch==${TORCH_VERSION}"
COPY requirements.txt requirements-nodeps.txt ./
RUN pip install -r requirements.txt && pip install --no-deps -r requirements-nodeps.txt
COPY . .
RUN DJANGO_DEBUG=0 DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v 0 \
    && useradd --create-home --uid 1000 marginalia && mkdir -p /data && chown marginalia /data
USER marginalia
EXPOSE 8000
CMD ["gunicorn", "marginalia.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]

# --- gpu -----------------------------------------------------------------------------------------
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04 AS gpu
ARG TORCH_VERSION
ARG TORCH_CUDA_INDEX
ENV DEBIAN_FRONTEND=noninteractive PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MARGINALIA_DATA_DIR=/data
RUN apt-get update \
    && apt-get install -y --no-install-recommends software-properties-common \
    && add-apt-repository -y ppa:deadsnakes/ppa \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
RUN pip install --extra-index-url "$TORCH_CUDA_INDEX" "torch==${TORCH_VERSION}"
COPY requirements.txt requirements-nodeps.txt ./
RUN pip install -r requirements.txt && pip install --no-deps -r requirements-nodeps.txt
COPY . .
RUN useradd --create-home --uid 1000 marginalia && mkdir -p /data && chown marginalia /data
USER marginalia
CMD ["celery", "-A", "marginalia", "worker", "-Q", "gpu", "--concurrency", "1", "--loglevel", "INFO"]
