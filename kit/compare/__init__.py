"""`kit compare`: line up bundles (or run folders, or results.json files) cell by cell.

- :mod:`kit.compare.load` turns each argument into a :class:`Source`.
- :mod:`kit.compare.measures` reads a cell's repeats as samples.
- :mod:`kit.compare.stats` computes ratios, confidence intervals and verdicts.
- :mod:`kit.compare.engine` builds the :class:`Comparison` (rows, warnings,
  cells that cannot be compared), judging methods against the baseline or within each group
  (:mod:`kit.compare.groups`); :mod:`kit.compare.gate` is ``--fail-if-slower``: what it tested,
  what it could not and why.
- :mod:`kit.compare.render` writes it as a rich table, CSV, JSON (:mod:`kit.compare.json_text`) or Markdown;
  :mod:`kit.report.html.compare` writes the HTML page.
- :mod:`kit.compare.once` counts each run once (copies, a resume's interrupted bundle).
- :mod:`kit.compare.fleet` (a subpackage) compares many machines at once (``--group-by``), each against
  the rest of its group, and names the slow and unstable ones.
"""
