#!/usr/bin/env bash
# Make the Dockerfile's base, docker.io/library/debian:bookworm-slim, in local podman storage
# from Debian's own archive, when it is missing. For machines that reach a Debian mirror but no
# container registry (CI here); with registry access `podman pull` does the same job.
#   deploy/image/base.sh            # a no-op when the image exists
# Needs root, podman and mmdebstrap (`make image-tools` installs them). The mirrors are the ones
# apt uses on this machine (its sources files), so the base gets what apt here would install.
#
# mmdebstrap, not debootstrap: the same minbase system from the same archive, 1:41 against
# 4:20 measured on the same (busy) CI machine, and it writes the tarball podman imports directly.
set -euo pipefail

BASE=docker.io/library/debian:bookworm-slim
SUITE=bookworm

if podman image exists "$BASE"; then
    exit 0
fi

# apt's own sources: deb822 files, else the one-line list, else Debian's redirector.
sources=()
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    if [[ -s $f ]] && grep -Eq "^[^#]*[[:space:]]$SUITE([[:space:]]|$)" "$f"; then
        sources+=("$f")
    fi
done
if ((${#sources[@]} == 0)); then
    sources=("deb http://deb.debian.org/debian $SUITE main")
fi

echo "mmdebstrap --variant=minbase $SUITE from ${sources[*]}"
# What makes the official image slim: later apt-get runs install no documentation, manuals or
# translations and keep no package cache (mmdebstrap leaves these settings in the image).
mmdebstrap --variant=minbase --quiet \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --aptopt='APT::Install-Recommends "false"' \
    --aptopt='Dir::Cache::pkgcache ""' \
    --aptopt='Dir::Cache::srcpkgcache ""' \
    "$SUITE" - "${sources[@]}" |
    podman import --change 'CMD ["bash"]' - "$BASE" >/dev/null
echo "imported $BASE ($(podman image inspect --format '{{.Size}}' "$BASE") bytes)"
