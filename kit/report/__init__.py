"""Self-contained HTML reports and SVG charts (no scripts, no network, no fonts).

- :mod:`kit.report.svg` (a subpackage) draws the charts: bar charts with error bars, stacked bars
  (a profiled step's parts), a fleet's ranked bars and heatmap.
- :mod:`kit.report.charts` decides which charts a run or a comparison gets.
- :mod:`kit.report.insights` writes the plain-language "what bound the run" lines.
- :mod:`kit.report.html` (a subpackage) renders ``report.html`` (one run, with its "Why this
  speedup" section) and the ``kit compare --html`` page.
- :mod:`kit.report.export` makes a run's bundle with its charts and report.
- :mod:`kit.report.show` prints ``kit bundle show`` and ``kit bundle verify``.
"""
