"""A fleet: many machines compared at once (``kit compare --group-by``), each against the rest of its group.

- :mod:`kit.compare.fleet.grouped` groups the machines and sets each one's repeats against the pooled
  repeats of the rest of its group, cell by cell (:class:`~kit.compare.fleet.grouped.FleetSummary`).
- :mod:`kit.compare.fleet.findings` names the slow and unstable machines, and where, under a
  false-discovery rate; :mod:`kit.compare.fleet.causes` the facts in which each differs from its group.
- :mod:`kit.compare.fleet.left_out` names what each group leaves out of its comparisons, and why.
- :mod:`kit.compare.fleet.summary` is the one-row-per-machine summary of each group.
- :mod:`kit.compare.fleet.views` shows machines as rows, in the terminal and in Markdown.
"""
