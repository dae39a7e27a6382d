#!/usr/bin/env bash
# Install what the tests use from the machine's package registries:
# Debian's Chromium, for the headless-browser check of report.html.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi
chromium --version
