"""The files of a run folder, by name: what the runner writes there, a bundle carries and every
reader looks for. The journal's name is its format's, :data:`kit.results.journal.JOURNAL_NAME`."""

#: the run's results (kit.results.schema.RunResults), rewritten atomically after each cell
RESULTS_NAME = "results.json"
#: the environment record (kit.env.record), also results.json's ``environment``
ENV_NAME = "env.json"
#: the run's log (kit.runner.run_log): each cell's traceback, the run's start and end
LOG_NAME = "run.log"
