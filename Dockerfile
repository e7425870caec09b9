# The predictive scaler's image: `scaler` on PATH, run as uid 10001, and nothing written outside
# /tmp, so it runs with a read-only root filesystem and a tmpfs (or emptyDir) on /tmp.
#   docker build -t predictive-scaler:dev .     # anywhere with registry and PyPI access
#   make image                                  # podman, as on CI (deploy/README.md, "The image")
# Debian's own Python, so that the base can be rebuilt from Debian's archive (deploy/image/base.sh).
#
# Stages: `python` (Debian's python3 and the user) is the base of the rest; `deps` builds the
# virtual environment from pyproject.toml's dependency list alone (`requirements`), so a code
# or metadata change reuses it; `code` installs the scaler itself beside it; `venv` is `deps`
# without pip and test suites.
# Every dependency installs from a wheel: no compiler in any stage.

FROM debian:bookworm-slim AS python
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 scaler \
    && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin scaler

# The dependency list alone, so that an edit elsewhere in pyproject.toml keeps the layers below.
FROM python AS requirements
COPY pyproject.toml /src/
RUN python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb")); print("\n".join(p["project"]["dependencies"] + p["build-system"]["requires"]))' >/requirements.txt

FROM python AS deps
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/scaler
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
COPY --from=requirements /requirements.txt /src/requirements.txt
# The run-time dependencies (no [dev] extras) and the build backend; the pip cache survives
# between builds on the same machine.
RUN --mount=type=cache,target=/root/.cache/pip \
    /opt/scaler/bin/pip install --only-binary=:all: -r /src/requirements.txt

FROM deps AS code
COPY pyproject.toml README.md /src/
COPY scaler /src/scaler
COPY models /src/models
RUN /opt/scaler/bin/pip install --no-deps --no-build-isolation --target /opt/code /src \
    && mkdir /opt/code-bin && mv /opt/code/bin/scaler /opt/code-bin/ && rmdir /opt/code/bin

FROM deps AS venv
RUN /opt/scaler/bin/pip uninstall -y setuptools wheel pip \
    && cd /opt/scaler/lib/python3.11/site-packages \
    && find numpy pandas scipy statsmodels matplotlib -type d -name tests -prune -exec rm -rf {} +

FROM python
# Everything that writes goes to /tmp: matplotlib's cache, cmdstan's (Prophet's) scratch files,
# Python's temporary files. Bytecode was compiled at install time and is never written at run time.
ENV PATH=/opt/scaler/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    TMPDIR=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Dependencies first (the large layer, unchanged by a code change), then the scaler itself.
COPY --from=venv /opt/scaler /opt/scaler
COPY --from=code /opt/code /opt/scaler/lib/python3.11/site-packages
COPY --from=code /opt/code-bin/scaler /opt/scaler/bin/scaler
RUN python3 -c 'import scaler.cli, prophet, statsmodels.api' && scaler --help >/dev/null
# Labels last: a new revision changes them and nothing above.
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="predictive-gpu-scaler" \
      org.opencontainers.image.description="KEDA external scaler that prewarms GPU inference replicas from a calibrated P95 forecast, under a strict budget" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
USER 10001:10001
WORKDIR /tmp
# gRPC (ExternalScaler + grpc.health.v1), HTTP (/metrics, /healthz, /readyz), and the
# plaintext grpc.health.v1 port for kubelet's grpc probe (with --health-port 9001).
EXPOSE 9000 8080 9001
ENTRYPOINT ["scaler"]
CMD ["serve"]
