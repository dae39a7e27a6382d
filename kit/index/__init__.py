"""The results index: one SQLite file that records verified bundles once, so that a fleet's
runs are filtered, compared and followed over time without reopening the tarballs.

- :mod:`kit.index.db`: the file, its versioned schema, the checks that it is the kit's, locking;
- :mod:`kit.index.ingest`: `kit index add` (verify with the bundle verifier, record in one transaction);
- :mod:`kit.index.query`: filters, the list, compare's sources, a machine's history.

docs/results-index.md is the user's guide.
"""
