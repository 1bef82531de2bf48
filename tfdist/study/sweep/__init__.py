"""A sweep: many trainings that differ in a few settings, run as one Slurm job array.

Each element is a full tfdist job (a jobs/*.sbatch script: any strategy, one or several nodes)
whose settings are flags added to `tfdist train` or to the user's own command, and whose
MODEL_DIR is derived from those settings: DIR/runs/<setting=value,...>. The index -> settings
mapping (DIR/sweep.json) is written before anything is submitted; jobs/common.sh reads the
element's MODEL_DIR and flags back from it (`tfdist sweep element DIR INDEX`). Submitting the same
sweep again resumes it: the elements that finished are not run again, the others resume from their
checkpoints. An element preempted or at its time limit requeues itself, never the array
(tfdist.cluster.requeue).

One module a job: grid (the settings: --grid, --settings_file), record (DIR/sweep.json, run and
log paths), submit (sbatch arrays), squeue (the states of the elements Slurm still knows), logs
(how an element that left the queue ended), status (one row per element), table and plot.
`tfdist sweep` (tfdist.cli.sweep) drives them.

No TensorFlow here: `tfdist sweep` answers at once on a login node.
"""
