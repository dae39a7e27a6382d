"""The host environment: doctor checks, the environment record, live GPU telemetry.

- ``probe``: the one shape of an unknown value, ``{"value": "unknown", "reason": ...}``.
- ``nvml``: driver and GPUs through NVML (the tests feed it a fake: tests/fixtures/nvml_fake.py).
- ``docker_probe``: the Docker engine and its GPU support.
- ``doctor``: a verdict per image stack (``kit doctor``, ``check_stack`` for ``kit launch``).
- ``preflight``: ``check_native_run`` before ``kit run``.
- ``bench_stack``: do torch, torchvision and fastai import here, and agree (tried in a child Python).
- ``record``: the environment record stored with every result.
- ``telemetry``: the NVML sampler around each cell.

Nothing here imports torch (bench_stack tries it in a child process).
"""
