"""The self-contained HTML pages: everything inline, no scripts, all text from results escaped.

- :mod:`kit.report.html.run_report`: ``report.html``, one run's report.
- :mod:`kit.report.html.why`: its "Why this speedup" section.
- :mod:`kit.report.html.compare`: ``kit compare --html``, the comparison and fleet pages.
- :mod:`kit.report.html.page`: the skeleton they share (CSS, the page, tables).
"""
