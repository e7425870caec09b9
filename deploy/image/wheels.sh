#!/usr/bin/env bash
# Download the image's run-time dependencies as wheels with this machine's pip, into DIR/wheels,
# and write DIR/pip.conf, which makes pip install from them alone. `make image` lends both to the
# build read-only (PODMAN_BUILD_FLAGS): for machines where pip reaches the package index only
# through the host's own pip configuration and CA bundle (a private index, an intercepting
# proxy), the build then needs no network for Python packages. The Dockerfile stays generic:
# without these mounts its pip uses PyPI.
#   PYTHON=.venv/bin/python deploy/image/wheels.sh out/image     # any Python 3.11+ with pip
# Wheels only (--only-binary): nothing is compiled, on the host or in the image.
set -euo pipefail

DIR=${1:?usage: wheels.sh DIR}
PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$DIR/wheels"

# The same list the Dockerfile installs: pyproject's dependencies and its build backend.
"$PYTHON" - "$ROOT/pyproject.toml" >"$DIR/requirements.new" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))
print("\n".join(project["project"]["dependencies"] + project["build-system"]["requires"]))
PY
if cmp -s "$DIR/requirements.new" "$DIR/requirements.txt" && [[ -f $DIR/pip.conf ]]; then
    rm "$DIR/requirements.new"
    exit 0  # the same requirements as the last complete download
fi
rm -f "$DIR/pip.conf"
"$PYTHON" -m pip download -qq --only-binary=:all: --dest "$DIR/wheels" \
    --find-links "$DIR/wheels" --requirement "$DIR/requirements.new"
mv "$DIR/requirements.new" "$DIR/requirements.txt"
cat >"$DIR/pip.conf" <<'CONF'
# Lent to the image build by `make image` (deploy/image/wheels.sh): the lent wheels only.
[global]
no-index = true
find-links = /run/scaler-wheels
CONF
