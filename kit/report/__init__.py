"""Self-contained HTML reports and SVG charts (no scripts, no network, no fonts).

- :mod:`kit.report.svg` draws bar charts with error bars.
- :mod:`kit.report.charts` decides which charts a run or a comparison gets.
- :mod:`kit.report.insights` writes the plain-language "what bound the run" lines.
- :mod:`kit.report.html` renders ``report.html`` (one run) and the
  ``kit compare --html`` page.
"""
