"""The host environment: doctor checks, the environment record, live GPU telemetry."""
