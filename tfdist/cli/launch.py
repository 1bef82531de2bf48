"""tfdist launch: start N processes of COMMAND on this machine, each with its rank.

  tfdist launch -n 2 -- tfdist train --strategy=multi_worker
  tfdist launch -n 4 --strategy=parameter_server -- python my_script.py

Every output line is prefixed with its rank. When one process fails the others are stopped and
launch exits with that process's status; Ctrl-C (or SIGTERM) is passed on to all of them. However
launch itself ends (SIGKILL included), its processes end with it: each runs in a process group of
its own under a small guard (tfdist.cli.launch_guard) that stops the group once launch is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Optional

from absl import flags

from tfdist.cli import flags as tfdist_flags
from tfdist.cli.command import run_command
from tfdist.cluster.launcher_choice import CHOICE_VARS
from tfdist.cluster.local import launch_environ
from tfdist.cluster.ports import free_port_base
from tfdist.logs import NoiseFilter
from tfdist.process_groups import end_groups, signal_group

FLAGS = flags.FLAGS

tfdist_flags.define_cluster_flags()
flags.DEFINE_integer("nproc", 2, "Number of processes to start.", lower_bound=1, short_name="n")
flags.DEFINE_float("grace",
                   30.0, "Seconds the other processes get to exit after one failed "
                   "(or after Ctrl-C) before they are killed.",
                   lower_bound=0)

_lock = threading.Lock()


def _pump(rank: int, stream) -> None:
    noise = NoiseFilter()
    for line in iter(stream.readline, b""):
        if not noise.keep(line.decode(errors="replace")):
            continue
        with _lock:
            sys.stdout.buffer.write(f"[{rank}] ".encode() + line)
            sys.stdout.flush()


def launch(command: list[str],
           nproc: int,
           strategy: Optional[str],
           port: Optional[int],
           grace: float,
           num_ps: Optional[int] = None,
           evaluator: Optional[bool] = None) -> int:
    """Run `command` nproc times; return the exit status launch should end with. `strategy` (not
    auto), `num_ps` and `evaluator` are the processes' choice: their tfdist.init() takes it, and
    one that asks for another stops (tfdist.cluster.launcher_choice)."""
    base = port or free_port_base(nproc)
    procs, pumps = [], []
    # Installed first: a signal that arrives while the processes start is passed on too.
    stop = {"signal": None}

    def forward(signum, frame):
        stop["signal"] = signum
        for p in procs:
            if p.returncode is None:  # unreaped: its pid still names its group (see _poll)
                signal_group(p.pid, signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, forward)

    # Only this process holds `held` (not inherited: close-on-exec): the guards see EOF on
    # `watched` as soon as launch is gone, however it ends.
    watched, held = os.pipe()
    guard = [sys.executable, "-m", "tfdist.cli.launch_guard", str(watched), f"{grace:g}", "--"]
    chosen = strategy not in (None, "auto")
    # A strategy chosen here replaces one the processes would inherit, with all its parts.
    inherited = {k: v for k, v in os.environ.items() if not (chosen and k in CHOICE_VARS)}
    for rank in range(nproc):
        env = dict(inherited,
                   PYTHONUNBUFFERED="1",
                   **launch_environ(rank, nproc, base, strategy if chosen else None, num_ps,
                                    evaluator))
        proc = subprocess.Popen(guard + command,
                                env=env,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT,
                                pass_fds=(watched, ),
                                start_new_session=True)
        pump = threading.Thread(target=_pump, args=(rank, proc.stdout), daemon=True)
        pump.start()
        procs.append(proc)
        pumps.append(pump)
    os.close(watched)

    status, deadline = 0, None
    while [_poll(p) for p in procs].count(None):
        if stop["signal"] is not None:
            # Interrupted: every process got the signal; give them `grace` s, then kill.
            deadline = deadline or time.monotonic() + grace
            if time.monotonic() > deadline:
                _stop_all([p for p in procs if _poll(p) is None], 0)
        elif status == 0:
            failed = [(r, p.returncode) for r, p in enumerate(procs)
                      if p.returncode not in (None, 0)]
            if failed:
                rank, code = failed[0]
                status = _exit_status(code)
                alive = [p for p in procs if _poll(p) is None]
                _say(f"rank {rank} {_describe(code)}; stopping the other {len(alive)} "
                     "process(es).")
                _stop_all(alive, grace)
        time.sleep(0.1)
    if status == 0:
        failed = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != 0]
        if failed:
            rank, code = failed[0]
            status = _exit_status(code)
            _say(f"rank {rank} {_describe(code)}.")
    if stop["signal"] is not None and status == 0:
        status = 128 + stop["signal"]
    for pump in pumps:  # every line the processes wrote, before launch's own exit
        pump.join(timeout=5)
    os.close(held)
    return status


def _stop_all(procs, grace: float) -> None:
    """SIGCONT and SIGTERM to each process's group, SIGKILL to those still running after
    `grace` s (tfdist.process_groups), and reap them."""
    by_group = {p.pid: p for p in procs}
    end_groups(by_group, grace, ended=lambda group: _poll(by_group[group]) is not None)
    for p in procs:
        p.wait()


def _poll(proc: subprocess.Popen) -> Optional[int]:
    """proc.poll(), SIGTERM to its group first once it ended: stragglers it left there hold its
    output open. A group is signalled only while its leader is unreaped (alive or a zombie): its
    pid then names no other process's group; once reaped, the number is free for any new
    process, and this machine's pids come round again within minutes."""
    if proc.returncode is None:
        try:
            ended = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            ended = None
        if ended is not None:
            signal_group(proc.pid, signal.SIGTERM)
    return proc.poll()


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code


def _describe(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def _say(message: str) -> None:
    with _lock:
        print(f"tfdist launch: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> None:
    command = argv[1:]
    if not command:
        print("tfdist launch: no command given. Usage: tfdist launch -n N -- COMMAND [ARGS...]",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(
        launch(command, FLAGS.nproc, FLAGS.strategy, FLAGS.port, FLAGS.grace,
               **tfdist_flags.given_parameter_server_flags()))


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__], tfdist_flags)
