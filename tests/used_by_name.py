"""Names under kit/ that no code names, because only a string reaches them (getattr, importlib, a
suite's or data set's descriptor read by field name): the unused-name check in
tests/test_architecture.py (vulture) counts each name written here as used. One name a line, with
a comment saying which string reaches it, e.g.::

    run_cell  # kit.bench.api reads it with getattr from the module a suite's descriptor names

None is needed today: every name under kit/ is named in code. This file is read, never imported.
"""
