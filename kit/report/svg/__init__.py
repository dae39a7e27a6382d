"""The report's charts as inert, self-contained ``<svg>`` elements (no scripts, no fonts to fetch).

- :mod:`kit.report.svg.plots`: grouped bar charts with error bars, and line charts (matplotlib).
- :mod:`kit.report.svg.stacked`: stacked horizontal bars, a profiled step's parts (matplotlib).
- :mod:`kit.report.svg.primitives`: what the matplotlib charts share (palette, fonts, series, ticks).
- :mod:`kit.report.svg.inline`: matplotlib's SVG made one inline ``<svg>`` element.
- :mod:`kit.report.svg.ranked` and :mod:`kit.report.svg.heatmap`: a fleet's ranked bars and
  heatmap, written as SVG directly.
"""
