"""The same as `kit fidelity apex` (kit/runner/fidelity.py), for a checkout without the `kit` command:

    python scripts/fidelity_lstm.py --apex-src ../shared/vendor/apex/apex-241dd6c4.tar.gz --fp16-utils apex-25.01
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.cli.main import main  # noqa: E402

if __name__ == "__main__":
    main(["fidelity", "apex", *sys.argv[1:]])
