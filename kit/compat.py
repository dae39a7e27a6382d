"""What differs between the Python versions the kit's runner meets.

The runner (``kit run``, kit/runner and kit/bench) also runs inside the cuda10
image on Python 3.7 with torch 1.4 (see kit/runner/legacy.py), so the modules it
imports keep to Python 3.7 syntax and take version-dependent pieces from here.
"""

try:
    from importlib import metadata
except ImportError:  # Python 3.7: the backport pinned in docker/locks/cuda10.txt
    import importlib_metadata as metadata  # type: ignore[no-redef]

__all__ = ["metadata"]
