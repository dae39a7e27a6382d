"""Results bundles: one ``.tar.gz`` per run that people share and compare.

- :mod:`kit.bundle.export` makes a bundle from a run folder, with the charts and
  report that the caller renders (:mod:`kit.report.export` passes them; the runner
  calls :func:`kit.report.export.export_run` at the end of every run).
- :mod:`kit.bundle.safe_open` opens a bundle from anywhere, treating it as
  untrusted: members are read into memory after checks, nothing is extracted,
  executed or unpickled.
- :mod:`kit.bundle.envinfo` reads the few environment facts that headlines,
  file names and comparability checks need, defensively.
- :mod:`kit.bundle.merge` joins bundles of one machine.

The bundle package imports neither the report nor the comparison: what ``kit bundle
show`` prints is :mod:`kit.report.show`.
"""
