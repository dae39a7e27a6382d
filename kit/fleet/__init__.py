"""Fleet sweeps: many `kit run`s on a cluster's scheduler, collected into one report (host side, no torch).

    kit fleet slurm submit   kit.fleet.sweep.plan_sweep -> sweep.json + job.sbatch (kit.fleet.slurm.render_script)
                             -> sbatch --array (one array per GPU count) -> the job ids in sweep.json
    kit fleet slurm status   squeue (the queue) + each task's exit_code file -> a state per task; --follow waits
    kit fleet slurm collect  each task's newest bundle, verified (kit.bundle) -> merged (kit.report.export)
                             and compared (kit.compare) -> merged/*.tar.gz, compare.html
    kit fleet slurm resubmit the tasks without a verified complete bundle, again (finished bundles stay)

A task is one `kit run` (natively with the submitting Python, or in the kit's image through pyxis or
Apptainer) writing its run folder and bundle under ``tasks/<index>/results/`` of the sweep folder, which
must be on a file system the nodes share. See docs/fleet.md.
"""
