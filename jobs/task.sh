#!/bin/bash
# One task of a tfdist batch job: jobs/common.sh runs `srun ... jobs/task.sh COMMAND...` and this
# runs COMMAND, says where, and passes its exit status (or signal) on, with two twists for
# preemption:
#  - SIGUSR1 starts ignored, so the time-limit warning (--signal=USR1@N) never kills a task that
#    has no handler (yet): one still importing TensorFlow, a parameter server, your own script.
#    tfdist train (or rt.callbacks(model_dir=...) in your script) installs its handler.
#  - A task other than rank 0 that exits 75 ("preempted, resumable") holds that exit until rank 0
#    ends too (at most TFDIST_PREEMPT_GRACE s, default 60): srun --kill-on-bad-exit would
#    otherwise kill rank 0 while it still writes its checkpoint or requeues the job.
# SIGTERM (scancel, preemption, a requeue ending the step) does not end this script before
# COMMAND: it is passed on and the script waits. Died first, it would leave COMMAND an orphan
# that escapes the step's SIGKILL after KillWait where Slurm tracks a step's processes by their
# parents (proctrack/linuxproc, pgid): measured, a rank stuck in TensorFlow's teardown after a
# requeue held its port until the requeued run's task found it in use.
trap '' USR1
# The TERM trap comes first: a SIGTERM between the start of COMMAND and the trap would end this
# script and leave COMMAND behind. One before `pid` is set is passed on once it is.
pid=
terminated=0
trap 'terminated=1; [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null' TERM
"$@" &
pid=$!
((terminated)) && kill -TERM "$pid" 2>/dev/null
echo "tfdist job: task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME (pid $pid)"
# A trapped signal interrupts `wait` (status > 128) while COMMAND runs on: wait until it has
# gone, then once more for its own status (bash keeps it; the last `wait` may have been cut short).
until wait "$pid"; ! kill -0 "$pid" 2>/dev/null; do :; done
wait "$pid"
status=$?
if ((status > 128)); then
    # Killed by a signal: say so, and die of the same signal, so that srun reports it as such.
    signal=$(kill -l "$status")
    echo "tfdist job: task $SLURM_PROCID on $SLURMD_NODENAME: killed by SIG$signal: $*" >&2
    trap - "$signal"
    kill -s "$signal" $$
elif [[ $status == 75 && ${SLURM_PROCID:-0} != 0 ]]; then
    # srun ends this task once rank 0 exits (kill-on-bad-exit) or the job is requeued. After a
    # SIGTERM that is under way already: no hold.
    trap 'kill $! 2>/dev/null; exit 75' TERM
    ((terminated)) && exit 75
    sleep "${TFDIST_PREEMPT_GRACE:-60}" &
    wait $!
fi
exit "$status"
