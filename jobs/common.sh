# shellcheck shell=bash
# Shared by jobs/*.sbatch (sourced, never run): find Python and tfdist, print what the job is about
# to do, check it with `tfdist doctor`, run one `srun --kill-on-bad-exit=1` step over every task and
# say in words how it ended. Entry point: tfdist_job STRATEGY "$@" (the job's arguments).
#
# Environment overrides (sbatch passes the submitting shell's environment on):
#   PYTHON       the Python that has tfdist (default: the active virtualenv, else the .venv of the
#                checkout that holds jobs/, else python3 on PATH); its bin/ goes first on PATH
#   TFDIST_BIN   the tfdist command (default: $PYTHON -u -m tfdist.cli.main)
#   MODEL_DIR    run directory: checkpoints, metrics.json, model (default: runs/<job name>-<job id>,
#                which a requeued job keeps); also the first positional argument. Exported: your
#                command's tfdist.init() takes it as rt.model_dir
#   PIPELINE (digits), MODEL (cnn), EPOCHS (tfdist train's: 10; parameter_server 20, with Adam),
#   BATCH_SIZE (per replica),
#   NUM_PS (parameter_server: 1), EVALUATOR (parameter_server: 1 makes the last task the
#   evaluator), CPU_DEVICES (mirrored without GPUs: split the CPU)
# The job's strategy (and NUM_PS, EVALUATOR) reach your command too, as TFDIST_STRATEGY (and
# TFDIST_NUM_PS, TFDIST_EVALUATOR): its tfdist.init() runs under them, and one that asks for
# another stops with an error naming both.
#   REQUEUE      1 (default): at the time-limit signal checkpoint, requeue, resume; 0: exit 75
#                (exported as TFDIST_REQUEUE, for tfdist train and your own rt.callbacks); also
#                after a hang or a lost task, at most TFDIST_MAX_RESTARTS (2) times a job
#   TFDIST_WATCHDOG_TIMEOUT  seconds without a training step before the job ends (auto: >= 300)
#   PROFILE_STEPS A:B: every rank traces training steps A..B (docs/profiling.md); PROFILE_RANKS
#                which ranks (default all). Read by tfdist train and your rt.callbacks alike:
#                sbatch and srun pass them on as they are, nothing here needs to
#   DOCTOR       quick (default: roles, ports, hosts, GPUs, model dir), full (+ TensorFlow and
#                Horovod imports, ~20 s), 0 (no pre-flight)
#   SRUN_ARGS    extra srun options, e.g. "--distribution=cyclic"
#   TF_CPP_MIN_LOG_LEVEL  TensorFlow's C++ log level: yours if set, else 2 (its errors only; 0 with
#                TFDIST_VERBOSE=1), as tfdist.init() sets it where tfdist is imported before
#                TensorFlow: here also for a script that imports Keras first

tfdist_log() { echo "tfdist job: $*"; }
tfdist_die() {
    echo "tfdist job: error: $*" >&2
    exit 2
}

tfdist_find_python() {
    if [[ -n ${PYTHON:-} ]]; then
        return
    elif [[ -n ${VIRTUAL_ENV:-} && -x $VIRTUAL_ENV/bin/python ]]; then
        PYTHON=$VIRTUAL_ENV/bin/python
    elif [[ -x $TFDIST_REPO/.venv/bin/python ]]; then
        PYTHON=$TFDIST_REPO/.venv/bin/python
    else
        PYTHON=$(command -v python3 || command -v python) ||
            tfdist_die "no python found: set PYTHON=/path/to/venv/bin/python (sbatch passes it on)."
    fi
}

# srun over every task of the job, each through jobs/task.sh (where it runs, signals, status 75).
tfdist_srun() {
    # shellcheck disable=SC2086  # SRUN_ARGS is a list of options
    srun --kill-on-bad-exit=1 --label ${SRUN_ARGS:-} "$TFDIST_JOBS_DIR/task.sh" "$@"
}

tfdist_job() {
    local strategy=$1
    shift
    [[ -n ${SLURM_JOB_ID:-} ]] ||
        tfdist_die "not inside a Slurm job: submit this script with sbatch (see docs/slurm.md)."

    # Arguments: [MODEL_DIR] [tfdist train flags...] [-- COMMAND [ARGS...]]
    local -a train_args=() command=()
    if [[ $# -gt 0 && $1 != -* ]]; then
        MODEL_DIR=$1
        shift
    fi
    while [[ $# -gt 0 ]]; do
        if [[ $1 == -- ]]; then
            shift
            command=("$@")
            [[ ${#command[@]} -gt 0 ]] || tfdist_die "nothing after '--': give the command to run."
            break
        fi
        train_args+=("$1")
        shift
    done
    if [[ ${#command[@]} -gt 0 && ${#train_args[@]} -gt 0 ]]; then
        tfdist_die "'${train_args[*]}' before '--' are flags of tfdist train, but the job runs" \
            "your command '${command[*]}' instead: put them after it."
    fi

    TFDIST_REPO=$(cd "$TFDIST_JOBS_DIR/.." && pwd)
    tfdist_find_python
    if [[ $PYTHON == */* ]]; then  # a `python` or `tfdist` in your command is the same one
        PATH="$(cd "$(dirname "$PYTHON")" && pwd):$PATH"
        export PATH
    fi
    export PYTHONUNBUFFERED=1
    # tfdist.logs.tf_cpp_level's rule, before any task's TensorFlow loads: a script that imports
    # keras before tfdist would print ~15 INFO lines per task (oneDNN, CPU features, CUDA stubs).
    if [[ -z ${TF_CPP_MIN_LOG_LEVEL+set} ]]; then
        [[ ${TFDIST_VERBOSE:-0} == 0 ]] && TF_CPP_MIN_LOG_LEVEL=2 || TF_CPP_MIN_LOG_LEVEL=0
        export TF_CPP_MIN_LOG_LEVEL
    fi
    # Read by tfdist train and by rt.callbacks(model_dir=...) in your own script alike.
    export TFDIST_REQUEUE=${REQUEUE:-1}
    MODEL_DIR=$(realpath -m -- "${MODEL_DIR:-runs/${SLURM_JOB_NAME:-tfdist}-$SLURM_JOB_ID}")
    export MODEL_DIR
    if [[ -n ${SLURM_CPUS_PER_TASK:-} ]]; then
        export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK # srun of Slurm 22.05+ does not inherit it
        export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$SLURM_CPUS_PER_TASK}
    fi

    local -a tfdist strategy_args=(--strategy="$strategy")
    if [[ -n ${TFDIST_BIN:-} ]]; then
        tfdist=("$TFDIST_BIN")
    else
        tfdist=("$PYTHON" -u -m tfdist.cli.main)
        "$PYTHON" -c "import tfdist" 2>/dev/null ||
            tfdist_die "tfdist is not installed in $PYTHON: activate its virtualenv before" \
                "sbatch, or set PYTHON=/path/to/venv/bin/python (or TFDIST_BIN)."
    fi
    # The job's choice, for every task's tfdist.init() (tfdist.cluster.launcher_choice): your
    # command's runs under this strategy, as tfdist train and the doctor do.
    export TFDIST_STRATEGY=$strategy TFDIST_STRATEGY_BY="jobs/$strategy.sbatch"
    unset TFDIST_NUM_PS TFDIST_EVALUATOR
    if [[ $strategy == parameter_server ]]; then
        export TFDIST_NUM_PS=${NUM_PS:-1}
        strategy_args+=(--num_ps="$TFDIST_NUM_PS")
        case ${EVALUATOR:-} in
            '') ;;
            1) strategy_args+=(--evaluator) ;;
            0) strategy_args+=(--noevaluator) ;;
            *) tfdist_die "EVALUATOR=$EVALUATOR: expected 1 (the last task evaluates) or 0." ;;
        esac
        [[ -z ${EVALUATOR:-} ]] || export TFDIST_EVALUATOR=$EVALUATOR
    fi
    # An element of `tfdist sweep`'s job array: its MODEL_DIR and flags, from the sweep's file.
    local -a element=()
    if [[ -n ${TFDIST_SWEEP_DIR:-} ]]; then
        [[ -n ${SLURM_ARRAY_TASK_ID:-} ]] ||
            tfdist_die "TFDIST_SWEEP_DIR is set, but this job is not an array element."
        local index=$((${TFDIST_SWEEP_OFFSET:-0} + SLURM_ARRAY_TASK_ID)) line
        line=$("${tfdist[@]}" sweep element "$TFDIST_SWEEP_DIR" "$index") ||
            tfdist_die "cannot read element $index of the sweep $TFDIST_SWEEP_DIR (above)."
        eval "element=($line)"
        MODEL_DIR=${element[0]}
        element=("${element[@]:1}")
        tfdist_log "sweep $TFDIST_SWEEP_DIR, element $index: ${element[*]}"
        # Your command reads $MODEL_DIR (exported); tfdist train gets --model_dir below.
        if [[ ${#command[@]} -gt 0 ]]; then
            command+=("${element[@]}")
        fi
    fi
    if [[ ${#command[@]} -eq 0 ]]; then
        # Epochs, optimizer and rate: tfdist train's per-strategy defaults (parameter_server:
        # 20 epochs of Adam at 0.001) unless EPOCHS or flags after MODEL_DIR say otherwise.
        command=("${tfdist[@]}" train "${strategy_args[@]}" --model_dir="$MODEL_DIR"
            --pipeline="${PIPELINE:-digits}" --model="${MODEL:-cnn}")
        [[ -n ${EPOCHS:-} ]] && command+=(--epochs="$EPOCHS")
        [[ -n ${BATCH_SIZE:-} ]] && command+=(--batch_size="$BATCH_SIZE")
        [[ -n ${CPU_DEVICES:-} ]] && command+=(--cpu_devices="$CPU_DEVICES")
        command+=("${train_args[@]}" "${element[@]}")
    fi

    tfdist_log "Slurm job $SLURM_JOB_ID ${SLURM_JOB_NAME:-}, run $((${SLURM_RESTART_COUNT:-0} + 1))" \
        "(SLURM_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}), $(date '+%F %T')"
    tfdist_log "$SLURM_JOB_NUM_NODES node(s) $SLURM_JOB_NODELIST, ${SLURM_NTASKS:-1} task(s)" \
        "(${SLURM_TASKS_PER_NODE:-1} per node), ${SLURM_CPUS_PER_TASK:-1} CPU(s) per task"
    tfdist_log "python $PYTHON, model dir $MODEL_DIR, strategy ${strategy_args[*]#--strategy=}"

    local -a doctor=("${tfdist[@]}" doctor "${strategy_args[@]}" --model_dir="$MODEL_DIR")
    case ${DOCTOR:-quick} in
        0) ;;
        quick | full)
            [[ ${DOCTOR:-quick} == quick ]] && doctor+=(--skip=tensorflow --skip=horovod)
            tfdist_log "pre-flight: ${doctor[*]}"
            tfdist_srun "${doctor[@]}" ||
                tfdist_die "tfdist doctor found a PROBLEM (above): the job stops before training." ;;
        *) tfdist_die "DOCTOR=$DOCTOR: expected quick, full or 0." ;;
    esac

    tfdist_log "srun --kill-on-bad-exit=1 --label ${SRUN_ARGS:-}${SRUN_ARGS:+ }$TFDIST_JOBS_DIR/task.sh ${command[*]}"
    local status=0
    tfdist_srun "${command[@]}" || status=$?
    case $status in
        0) tfdist_log "finished: every task exited 0 ($(date '+%F %T'))." ;;
        124) echo "tfdist job: error: stalled (status 124): no training step within the" \
            "watchdog's time; the line 'stalled: ... Stopped progressing: ...' above names the" \
            "rank(s), their stacks are the lines 'N: tfdist: rank N: ...' ($(date '+%F %T'))." >&2 ;;
        75) tfdist_log "preempted (status 75): the checkpoint in $MODEL_DIR is resumable; submit" \
            "the same job again with MODEL_DIR=$MODEL_DIR to continue." ;;
        *) echo "tfdist job: error: the srun step failed with status $status ($(date '+%F %T'))." \
            "'srun: error: NODE: task N: ...' above names the task that failed first; its own" \
            "messages are the lines labelled 'N:'." >&2 ;;
    esac
    return "$status"
}
