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
trap '' USR1
"$@" &
pid=$!
echo "tfdist job: task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME (pid $pid)"
status=0
wait "$pid" || status=$?
if ((status > 128)); then
    # Killed by a signal: say so, and die of the same signal, so that srun reports it as such.
    signal=$(kill -l "$status")
    echo "tfdist job: task $SLURM_PROCID on $SLURMD_NODENAME: killed by SIG$signal: $*" >&2
    trap - "$signal"
    kill -s "$signal" $$
elif [[ $status == 75 && ${SLURM_PROCID:-0} != 0 ]]; then
    # srun ends this task once rank 0 exits (kill-on-bad-exit) or the job is requeued.
    trap 'kill $! 2>/dev/null; exit 75' TERM
    sleep "${TFDIST_PREEMPT_GRACE:-60}" &
    wait $!
fi
exit "$status"
