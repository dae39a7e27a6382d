"""`kit compare`: line up bundles (or run folders, or results.json files) cell by cell.

- :mod:`kit.compare.load` turns each argument into a :class:`Source`.
- :mod:`kit.compare.measures` reads a cell's repeats as samples.
- :mod:`kit.compare.stats` computes ratios, confidence intervals and verdicts.
- :mod:`kit.compare.engine` builds the :class:`Comparison` (rows, warnings,
  cells that cannot be compared), judging methods against the baseline or within each group
  (:mod:`kit.compare.groups`); :mod:`kit.compare.gate` is ``--fail-if-slower``: what it tested,
  what it could not and why.
- :mod:`kit.compare.render` writes it as a rich table, CSV, JSON (:mod:`kit.compare.json_text`) or Markdown;
  :mod:`kit.report.html` writes the HTML page.
- :mod:`kit.compare.once` counts each run once (copies, a resume's interrupted bundle).
- :mod:`kit.compare.fleet` groups many machines (``--group-by``), each against the rest of its group;
  :mod:`kit.compare.fleet_findings` names the slow and unstable ones, where, and
  (:mod:`kit.compare.fleet_causes`) the facts that differ; :mod:`kit.compare.fleet_left_out` names what
  each group leaves out and why; :mod:`kit.compare.fleet_summary` is the
  one-row-per-machine summary; :mod:`kit.compare.fleet_views` shows machines as rows where they do
  not fit as columns.
"""
