#!/bin/sh
# pip install inside the image build, honouring the mirror build arguments.
#
# The Dockerfile's ARGs PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_TRUSTED_HOST
# arrive as environment variables, empty when not given; pip would take an
# empty PIP_INDEX_URL literally, so empty ones are unset here.
set -eu
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST; do
    eval "val=\${$var:-}"
    if [ -z "$val" ]; then unset "$var"; fi
done
if [ -n "${PIP_INDEX_URL:-}${PIP_EXTRA_INDEX_URL:-}" ]; then
    echo "pip-install: index ${PIP_INDEX_URL:-https://pypi.org/simple}; extra: ${PIP_EXTRA_INDEX_URL:-none}"
fi
exec /opt/venv/bin/python -m pip install --progress-bar off "$@"
