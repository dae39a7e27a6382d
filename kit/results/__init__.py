"""The results model (one versioned schema), the event journal and atomic writes."""
