"""The results index: one SQLite file that records verified bundles once, so that a fleet's
runs are filtered, compared and followed over time without reopening the tarballs.

- :mod:`kit.index.db`: the file, its versioned schema, the checks that it is the kit's (its schema
  exactly, for a file that may come from anyone), SQLite's defensive settings, locking; opening it to
  write (a journal rolled back, an older schema migrated, a new index linked into place whole);
- :mod:`kit.index.reader`: opening it to read, which never writes (read-only, a journal or WAL refused);
- :mod:`kit.index.files`: what a path is (a FIFO, an empty file...) and what lies beside it, before
  SQLite opens anything; the file system it is on;
- :mod:`kit.index.bounds`: the limits its content keeps (runs, every column's values, blob sizes),
  checked in SQL before anything is built from it;
- :mod:`kit.index.ingest`: `kit index add` (verify with the bundle verifier, record in batches, one
  transaction each);
- :mod:`kit.index.figures_codec`: how a run's figures are stored, and every stored blob read back
  under a cap and checked;
- :mod:`kit.index.runs`: each run counted once (copies of a run, an interrupted bundle superseded by
  its completed resume);
- :mod:`kit.index.query`: filters, the list, compare's sources;
- :mod:`kit.index.history`: a machine's history (keyed by its host id, broken where the method or the
  GPU changed) and its summary; :mod:`kit.index.history_view` its JSON and tables.

docs/results-index.md is the user's guide.
"""
