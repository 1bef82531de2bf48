"""The progress watchdog: a training process that completes no step for a time T dumps the stacks
of all its threads, the job names the rank(s) that stopped progressing, and the process ends with
status 124 (EXIT_STALLED) instead of waiting for the time limit.

A thread of its own, fed by one tiny call per completed step (`step_completed`, from Keras
callbacks of either Keras: tfdist.train.watchdog_callback), or reading a counter of completed
steps each interval where Keras keeps one (`poll_steps`: no call per step), and told of slow
phases (`slow_phase`: start, epoch ends, checkpoint writes, validation) that get a longer grace
until the next step. Batches taken by the steps count as progress too (`watch_activity`: counters
the steps add to, read each interval): Keras 3 calls the batch hooks once a call, so at
steps_per_execution N the hooks alone would see progress every N steps -- a call longer than T
ended a healthy run, and a hang inside the first call after a slow phase had the slow grace.
No TensorFlow and no Keras here: a thread can still run while the main thread is blocked in a
TensorFlow collective (TensorFlow releases the GIL while it executes), and ends the process with
os._exit, which needs nothing from TensorFlow.

Who is stuck is found without the stuck collective: every rank publishes its last step with a
heartbeat (tfdist.train.progress_board); when a rank stalls it watches the others' records for
a few heartbeats: a rank whose heartbeat stopped is frozen (SIGSTOP, a dead node); one whose input
pipeline delivered fewer batches than the others' waits for its input. The lowest responding rank
(rank 0 unless it is the frozen one) prints the one-line summary and, with requeue on, requeues the
job (tfdist.train.restarts); the others wait for that line, then exit too.

Last resort when Python itself cannot run (a C extension holding the GIL in a hung read):
faulthandler's C thread, re-armed by this thread, dumps the stacks and exits (status 1).

T: $TFDIST_WATCHDOG_TIMEOUT or --watchdog_timeout, seconds, 0 or "off" to turn it off; default
"auto": 50 times the slowest steady step time seen, at least 5 minutes; after a slow phase
max(10 minutes, 3 T).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional

from tfdist import env_vars
from tfdist.errors import ConfigError
from tfdist.train.progress_board import ProgressBoard

log = logging.getLogger("tfdist")

EXIT_STALLED = 124  # as timeout(1): timed out waiting for progress
TIMEOUT_ENV = env_vars.WATCHDOG_TIMEOUT.name
AUTO_FLOOR = 300.0  # seconds: T is never shorter by default
AUTO_STEPS = 50  # T is at least this many times the slowest steady step
SLOW_FLOOR = 600.0  # the grace after a slow phase is at least this...
SLOW_TIMES = 3  # ...and at least this many times T
FALLBACK_MARGIN = 60.0  # faulthandler's exit comes this long after the watchdog's own
COUNT_TIMEOUT = 10.0  # seconds a stalled rank waits for its input counter's value

_current: dict[str, Optional["Watchdog"]] = {"watchdog": None}


def timeout_setting(value: Any = None, environ=None) -> Optional[float]:
    """The watchdog's T from `value` (a flag or argument), else $TFDIST_WATCHDOG_TIMEOUT:
    seconds > 0; None for "auto" (the default); 0.0 for off ("0", "off")."""
    environ = os.environ if environ is None else environ
    source = "watchdog_timeout"
    if value is None:
        value, source = environ.get(TIMEOUT_ENV, "auto") or "auto", TIMEOUT_ENV
    given, seconds = value, value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return None
        if text in ("off", "none", "false", "no"):
            return 0.0
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
    if seconds < 0:
        raise ConfigError(f"{source}={given!r}: expected seconds without a completed training "
                          "step before the job is ended (e.g. 600), 'auto' (the default: 50 "
                          "step times, at least 300 s) or 0/'off' to turn the watchdog off.")
    return float(seconds)


def current() -> Optional["Watchdog"]:
    """This process's running watchdog, if any."""
    return _current["watchdog"]


def slow_phase() -> None:
    """Tell this process's watchdog (if any) that a slow phase begins (a checkpoint write)."""
    watchdog = _current["watchdog"]
    if watchdog is not None:
        watchdog.slow_phase()


class Watchdog:
    """See the module docstring. `timeout`: T in seconds, None for auto. `board`: the side
    channel (None: this rank reports only on itself). `ranks`: the ranks that publish records
    (every training rank; parameter_server: the chief only). `peers`: a callable naming the
    unreachable peer tasks (e.g. parameter-server workers that are gone). `input_batches`: a
    callable for the batches this rank's input pipeline has delivered (None: unknown).
    `report`: given the summary, does what ends the run (requeue) and returns words to add.
    `host`: this task's node as the job knows it (default: the host name). `count_timeout`:
    seconds a stalled rank waits for its input counter (and the others' reports wait for it)."""

    def __init__(self,
                 rank: int,
                 timeout: Optional[float] = None,
                 board: Optional[ProgressBoard] = None,
                 ranks: Optional[list[int]] = None,
                 peers: Optional[Callable[[], list[str]]] = None,
                 input_batches: Optional[Callable[[], Optional[int]]] = None,
                 report: Optional[Callable[[str], str]] = None,
                 host: Optional[str] = None,
                 exit: Callable[[int], None] = os._exit,
                 count_timeout: float = COUNT_TIMEOUT):
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"timeout={timeout}: expected seconds > 0 or None (auto); leave "
                              "the watchdog out to turn it off.")
        self.rank, self.timeout, self.board = rank, timeout, board
        self.ranks = ranks if ranks is not None else [rank]
        self.peers, self.input_batches, self.report = peers, input_batches, report
        self.host, self.pid = host or socket.gethostname(), os.getpid()
        self._exit, self.count_timeout = exit, count_timeout
        self.steps = 0
        self.epoch = 0
        self._last = time.monotonic()
        self._slow = True  # the first step traces and connects
        self._slowest = 0.0  # slowest steady step seen (auto T)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._beat = 0
        self._ending = threading.Lock()
        self._source: Optional[Callable[[], int]] = None
        self._polled_from = 0  # self.steps when polling began
        self._local = False  # the polled source answers at once (a variable in this process)
        self._count = threading.Lock()  # a polled count against a slow phase's
        self._activity: Optional[_Reader] = None
        self._seen: tuple = ()  # the activity counters' values last read
        self._phase = 0  # slow phases begun: a read started before the last one is stale

    # -- fed by the training loop (keep them tiny: they run after every step) --
    def step_completed(self, steps: int = 1) -> None:
        """`steps`: those the call just done ran (steps_per_execution)."""
        self.steps += steps
        self._last = time.monotonic()
        self._slow = False

    def progressed(self) -> None:
        """Progress that is no training step (a validation step)."""
        self._last = time.monotonic()
        self._slow = False

    def slow_phase(self) -> None:
        with self._count:
            if self._source is not None and self._local:
                # The steps done before the phase are counted now: the next poll must not take
                # them for progress in it (and cut the phase's grace to T).
                self._take(_call_with_timeout(self._source, COUNT_TIMEOUT))
            self._rebase()  # the same for the batches taken before it
            self._last = time.monotonic()
            self._slow = True

    def _rebase(self) -> None:
        """Read the activity counters now (with self._count held): what they count so far is no
        progress in the phase that begins; reads begun before it are stale."""
        if self._activity is not None:
            self._phase += 1
            now = _call_with_timeout(self._activity.source, COUNT_TIMEOUT)
            self._seen = tuple(now) if now is not None else self._seen  # kept if the read failed

    def watch_activity(self, source: Optional[Callable[[], tuple]]) -> None:
        """Take a rise of any of the counters `source` returns (a tuple; None where a counter
        does not exist yet) for progress: batches the steps have taken, read each interval in a
        thread of its own (a read that hangs delays nothing). A counter that falls (a new fit's)
        is progress once it rises again. Local counters only: slow_phase() reads them first."""
        self._activity = _Reader(source, lambda: self._phase) if source is not None else None
        self._seen = ()

    def read_activity(self) -> None:
        """Take the last completed read of the activity counters (and start the next one)."""
        if self._activity is None:
            return
        got = self._activity.poll()
        if got is None:
            return
        values, phase = got
        with self._count:
            if phase != self._phase:  # read before a slow phase began: stale
                return
            if _rose(self._seen, values):
                self._last, self._slow = time.monotonic(), False
            self._seen = values

    def poll_steps(self, source: Optional[Callable[[], int]], local: bool = False) -> None:
        """Read the completed steps from `source` each interval instead of being fed: where
        Keras counts them (tf-keras's step counter: no call per step), and where the loop's
        hooks see steps scheduled, not completed (parameter_server's chief). `source` counts the
        steps of this fit, from 0; None: be fed again. `local`: it answers at once (a variable
        of this process): slow_phase() reads it first."""
        self._source, self._polled_from, self._local = source, self.steps, local

    def read_steps(self, timeout: float) -> None:
        """Take the completed steps from the polled source now, waiting up to `timeout` s for
        it (also at an epoch's end, when every scheduled step has run: the count is exact)."""
        done = _call_with_timeout(self._source, timeout) if self._source is not None else None
        with self._count:
            self._take(done)

    def _take(self, done: Optional[int]) -> None:
        if done is not None and self._polled_from + done > self.steps:
            self.steps, self._last, self._slow = self._polled_from + done, time.monotonic(), False

    # -- limits --
    def limit(self) -> float:
        """Seconds without a step that end the run, now."""
        t = self.timeout
        if t is None:
            t = max(AUTO_FLOOR, AUTO_STEPS * self._slowest)
        return max(SLOW_FLOOR, SLOW_TIMES * t) if self._slow else t

    def _interval(self) -> float:
        """Seconds between heartbeats and checks: a tenth of T, 0.5 to 10 s."""
        return min(10.0, max(0.5, (self.timeout or AUTO_FLOOR) / 10))

    # -- the thread --
    def start(self) -> "Watchdog":
        self._stop.clear()
        with self._count:
            self._rebase()
            self._last, self._slow = time.monotonic(), True
        _current["watchdog"] = self
        self._thread = threading.Thread(target=self._run, name="tfdist-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        faulthandler.cancel_dump_traceback_later()
        if _current["watchdog"] is self:
            _current["watchdog"] = None

    def _run(self) -> None:
        interval = self._interval()
        seen = (self.steps, time.monotonic())
        while not self._stop.wait(interval):
            self.read_steps(interval)
            self.read_activity()
            now, steps, slow = time.monotonic(), self.steps, self._slow
            if steps > seen[0] + 1 and not slow:  # steady steps: their time sets auto T
                self._slowest = max(self._slowest, (now - seen[1]) / (steps - seen[0]))
            if steps != seen[0]:
                seen = (steps, now)
            limit = self.limit()
            _arm_fallback(limit + FALLBACK_MARGIN)
            self._publish("running")
            idle = now - self._last
            if idle > limit:
                self._fire(idle, limit)
                return

    def _publish(self, state: str, **extra: Any) -> None:
        if self.board is None:
            return
        self._beat += 1
        try:
            self.board.publish(
                dict(state=state,
                     beat=self._beat,
                     step=self.steps,
                     epoch=self.epoch + 1,
                     host=self.host,
                     pid=self.pid,
                     **extra))
        except OSError as e:  # a full or gone file system must not end training
            log.debug("watchdog: could not publish progress: %s", e)

    # -- when no step came for too long, or a peer was lost --
    def end_now(self, reason: str) -> None:
        """From the main thread, when training failed because a peer task was lost (`reason`,
        e.g. "Lost worker 1 ..."): the same report as a stall -- stacks, the summary naming who
        stopped, requeue -- and return; the caller ends the process (status 1)."""
        self._stop.set()
        self._end(reason, None, in_watchdog=False)

    def _fire(self, idle: float, limit: float) -> None:
        log.error(
            "rank %d on %s (pid %d): no training step completed for %.0f s (limit %.0f s, "
            "%s); last completed step %d. Stacks of its threads follow.", self.rank, self.host,
            self.pid, idle, limit, TIMEOUT_ENV, self.steps)
        self._end(f"stalled: no training step for {idle:.0f} s (limit {limit:.0f} s).",
                  EXIT_STALLED,
                  in_watchdog=True)

    def _end(self, head: str, status: Optional[int], in_watchdog: bool) -> None:
        if not self._ending.acquire(blocking=False):
            threading.Event().wait()  # the other thread is ending the process
        faulthandler.cancel_dump_traceback_later()
        if not in_watchdog:
            log.error(
                "rank %d on %s (pid %d): %s Last completed step %d. Stacks of its threads "
                "follow.", self.rank, self.host, self.pid, head, self.steps)
        dump_stacks(f"tfdist: rank {self.rank}: ", skip_current=in_watchdog)
        batches = _call_with_timeout(self.input_batches, self.count_timeout)
        self._publish("stalled", input_batches=batches)
        records = {}
        if self.board is not None:
            # Long enough for a responsive rank's heartbeat, and for a rank stalled about now to
            # read its input counter and say so (its heartbeat stops meanwhile: it would pass for
            # frozen); sooner once every rank has said.
            window = 3 * self._interval() + 2 + self.count_timeout

            def all_in(now):
                return all(rec is not None and rec.get("state") != "running"
                           for rec in now.values())

            records = self.board.watch(self.ranks, window, all_in)
        alive = sorted(r for r, rec in records.items() if rec is not None and rec.get("alive"))
        reporter = alive[0] if alive else self.rank
        if reporter == self.rank:
            summary = self.summary(records, head, batches)
            more = self.report(summary) if self.report is not None else ""
            log.error("%s%s", summary, f" {more}" if more else "")
            self._publish("reported")
        else:  # it reports: wait for its line (srun --kill-on-bad-exit would cut it short)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                rec = self.board.read(reporter)
                if rec is not None and rec.get("state") == "reported":
                    break
                time.sleep(0.2)
        sys.stdout.flush()
        sys.stderr.flush()
        if status is not None:
            logging.shutdown()
            self._exit(status)

    def summary(self, records: dict[int, Optional[dict]], head: str,
                own_batches: Optional[int]) -> str:
        """One line: which rank(s) stopped progressing, the last step each reached, the host."""
        if not records:
            records = {
                self.rank:
                dict(alive=True,
                     step=self.steps,
                     host=self.host,
                     pid=self.pid,
                     input_batches=own_batches)
            }
        frozen = [r for r, rec in records.items() if rec is None or not rec.get("alive")]
        alive = {r: rec for r, rec in records.items() if r not in frozen}
        counts = {r: rec.get("input_batches") for r, rec in alive.items()}
        known = [c for c in counts.values() if c is not None]
        starving = []
        if len(known) > 1 and min(known) < max(known):
            starving = [r for r, c in counts.items() if c is not None and c == min(known)]
        gone = self.peers() if self.peers is not None else []
        parts = []
        for r in frozen:
            rec = records[r]
            where = (f"rank {r} on {rec['host']} (pid {rec['pid']}) last seen at step {rec['step']}"
                     if rec else f"rank {r} (never published its progress)")
            parts.append(f"{where}: no heartbeat (frozen, stopped, or its node failed)")
        for r in starving:
            rec = alive[r]
            parts.append(f"rank {r} on {rec['host']} (pid {rec['pid']}) at step {rec['step']}: "
                         f"waiting for its input pipeline ({counts[r]} batches delivered, the "
                         f"others {max(known)})")
        if gone:
            parts.append(f"{', '.join(gone)}: gone (connection refused)")
        others = [r for r in alive if r not in starving]
        waited = ", ".join(f"rank {r} at step {alive[r]['step']}" for r in others)
        head = f"{head} Stopped progressing: "
        if parts:
            text = head + "; ".join(parts) + (f". Waiting: {waited}." if waited else ".")
        else:
            text = head + (f"{waited}, none stands out (a hung collective or device? see the "
                           "stacks)." if len(alive) > 1 else f"{waited} on {self.host}.")
        return text + " Stacks: the 'tfdist: rank N:' lines above."


class _Reader:
    """Reads `source` in a thread of its own, one read at a time: poll() returns the values of a
    read completed since the last poll with the phase it started in, or None, and starts the
    next read."""

    def __init__(self, source: Callable[[], tuple], phase: Callable[[], int]):
        self.source, self.phase = source, phase
        self._done: Optional[tuple] = None
        self._busy = False
        self._lock = threading.Lock()

    def poll(self) -> Optional[tuple]:
        with self._lock:
            done, self._done = self._done, None
            if self._busy:
                return done
            self._busy = True

        def read():
            try:
                values = tuple(self.source())
            except Exception as e:  # a broken runtime: no activity seen
                log.debug("watchdog: %s", e)
                values = None
            with self._lock:
                self._busy = False
                if values is not None:
                    self._done = (values, started)

        started = self.phase()
        threading.Thread(target=read, daemon=True, name="tfdist-watchdog-read").start()
        return done


def _rose(before: tuple, now: tuple) -> bool:
    """Whether a counter known in both reads is higher now."""
    return any(b is not None and n is not None and n > b for b, n in zip(before, now))


def _arm_fallback(seconds: float) -> None:
    """faulthandler's exit in `seconds` unless re-armed: it needs no GIL (the real stderr, fd 2:
    sys.stderr may be a wrapper without a file descriptor)."""
    try:
        faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)
    except (AttributeError, ValueError, OSError) as e:
        log.debug("watchdog: no faulthandler fallback: %s", e)


def dump_stacks(prefix: str, out=None, skip_current: bool = False) -> None:
    """Every Python thread's stack, each line prefixed (its rank, in a log of many ranks);
    `skip_current`: not the calling thread's (the watchdog's own)."""
    out = out or sys.stderr
    names = {t.ident: t.name for t in threading.enumerate()}
    lines, me = [], threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if skip_current and ident == me:
            continue
        lines.append(f"Thread {names.get(ident, ident)} (most recent call last):")
        lines.extend(line for entry in traceback.format_stack(frame)
                     for line in entry.rstrip("\n").split("\n"))
    out.write("".join(f"{prefix}{line}\n" for line in lines))
    out.flush()


def _call_with_timeout(fn: Optional[Callable[[], Any]], seconds: float) -> Any:
    """fn() in a thread of its own, None if it does not return in time (or fails)."""
    if fn is None:
        return None
    result: list[Any] = [None]

    def call():
        try:
            result[0] = fn()
        except Exception as e:  # a broken runtime: report without it
            log.debug("watchdog: %s", e)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    return result[0]
