#!/usr/bin/env bash
# The host side installs light: `pip install .` without the bench extra must give a
# working CLI that never needs torch. Checked in a fresh virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
start=$SECONDS
"$tmp/venv/bin/pip" install -q . 2>&1 | grep -v "is ignored" || true
echo "host install: $((SECONDS - start)) s"
if "$tmp/venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "FAIL: pip install . pulled in torch"; exit 1
fi
"$tmp/venv/bin/kit" --help >/dev/null
"$tmp/venv/bin/kit" data --help >/dev/null
"$tmp/venv/bin/python" -c "import kit.cli.main, sys; assert 'torch' not in sys.modules"
# With no route to the data set's hosts, fetch must fail cleanly (exit 3) and say what to do.
set +e
(cd "$tmp" && KIT_DATA_DIR="$tmp/data" timeout 120 "$tmp/venv/bin/kit" data fetch cifar100) >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
if [ "$rc" -ne 3 ]; then echo "FAIL: kit data fetch exited $rc, expected 3"; exit 1; fi
grep -q "eb9058c3a382ffc7106e4002c42a8d85" "$tmp/out" || { echo "FAIL: message lacks the checksum"; exit 1; }
grep -q -- "--data synthetic" "$tmp/out" || { echo "FAIL: message lacks the synthetic alternative"; exit 1; }
if grep -q Traceback "$tmp/out"; then echo "FAIL: traceback shown"; exit 1; fi
echo "host install check: 4 passed, 0 failed"
