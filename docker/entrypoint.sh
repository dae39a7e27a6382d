#!/bin/sh
# The image's entrypoint: run the kit (or the stack's own runner) as the right user.
#
# 1. Started as root with KIT_RUN_AS_OWNER_OF=/results (what compose.yaml does),
#    it drops to the owner of that folder, so files written to ./results belong
#    to whoever owns ./results on the host. A root-owned folder keeps root.
#    (`kit launch` instead starts the container as the invoking user.)
# 2. KIT_RUNNER=kit (cpu, cuda12) runs the `kit` command with the arguments.
#    Any other value is a Python module run from the kit's source in
#    /opt/kit/src: the cuda10 stack's Python 3.7 cannot install the kit itself.
set -eu

if [ "$(id -u)" = 0 ] && [ -n "${KIT_RUN_AS_OWNER_OF:-}" ] && [ -d "$KIT_RUN_AS_OWNER_OF" ]; then
    uid="$(stat -c %u "$KIT_RUN_AS_OWNER_OF")"
    gid="$(stat -c %g "$KIT_RUN_AS_OWNER_OF")"
    if [ "$uid" != 0 ]; then
        if command -v setpriv >/dev/null 2>&1; then
            exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$0" "$@"
        fi
        # Ubuntu 18.04 (the cuda10 stack) has no setpriv in its base system: the
        # same drop (groups cleared, gid, then uid) with the image's Python
        exec /opt/venv/bin/python -c 'import os, sys
os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[1]))
os.execv(sys.argv[3], sys.argv[3:])' "$uid" "$gid" "$0" "$@"
    fi
fi

runner="${KIT_RUNNER:-kit}"
if [ "$runner" = kit ]; then
    # 3. KIT_RUN_NOTE (compose.cpu.yaml: "No GPU was used: ...") is printed by the kit itself as its
    #    last line, whatever the outcome (kit.cli.main; `kit run` ends at once, without Python's
    #    teardown, so a wrapper here would never get to print it)
    exec kit "$@"
fi

export PYTHONPATH="/opt/kit/src${PYTHONPATH:+:$PYTHONPATH}"
if ! python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$runner') is None)" 2>/dev/null; then
    echo "error: this image's runner ($runner, for the ${KIT_STACK:-?} stack) is not in the kit yet." >&2
    echo "what to do: use the cuda12 stack (kit launch --stack cuda12) until the ${KIT_STACK:-?} runner is released; see docs/containers.md." >&2
    exit 6
fi
exec python -m "$runner" "$@"
