"""Self-contained HTML reports and SVG charts (no scripts, no network, no fonts).

- :mod:`kit.report.svg` draws bar charts with error bars; :mod:`kit.report.svg_stacked` stacked
  horizontal bars (a profiled step's parts).
- :mod:`kit.report.charts` decides which charts a run or a comparison gets.
- :mod:`kit.report.insights` writes the plain-language "what bound the run" lines.
- :mod:`kit.report.html` renders ``report.html`` (one run) and the
  ``kit compare --html`` page; :mod:`kit.report.html_why` its "Why this speedup" section.
- :mod:`kit.report.export` makes a run's bundle with its charts and report.
- :mod:`kit.report.show` prints ``kit bundle show`` and ``kit bundle verify``.
"""
