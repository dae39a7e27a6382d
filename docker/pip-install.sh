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
# Today's default index, said out loud: Ubuntu 18.04's pip 9 (used once, to install the
# stack's pip) still defaults to pypi.python.org, a name that no longer resolves everywhere.
if [ -z "${PIP_INDEX_URL:-}" ]; then
    PIP_INDEX_URL=https://pypi.org/simple
    export PIP_INDEX_URL
    default_index=1
fi
if [ -z "${default_index:-}" ] || [ -n "${PIP_EXTRA_INDEX_URL:-}" ]; then
    echo "pip-install: index ${PIP_INDEX_URL:-https://pypi.org/simple}; extra: ${PIP_EXTRA_INDEX_URL:-none}"
fi
# as a variable, not --progress-bar: Ubuntu 18.04's pip 9 (before the upgrade to the
# stack's pip) has no such option, and pip ignores variables for options it lacks
PIP_PROGRESS_BAR=off exec /opt/venv/bin/python -m pip install "$@"
