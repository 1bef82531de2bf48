"""Keras 3 releases measured with tfdist's own tests on this venv's TensorFlow: the table of
docs/compatibility.md.

    .venv/bin/python tools/keras3_releases.py [--group NAME ...] [--reuse] [VERSION ...]

VERSION: Keras releases (default: the newest patch of every Keras 3 minor that this venv's
TensorFlow admits, its `Requires-Dist: keras ...`, up to the newest on the package index). Each
release is installed once, without dependencies, into build/keras3-releases/VERSION and used as an
overlay (PYTHONPATH), so that `import keras` and tf.keras are that Keras and everything else is the
venv's. Every group of GROUPS then runs with pytest under that overlay, first as a user runs it.
A group where tfdist refused the release's code as code it does not know (KerasCorrectionUnknown)
runs again with TFDIST_KERAS3_TRY=1, which lets the corrections run on it, to measure them there.
The table says both, with each group's wall time; then the corrected functions whose source
known_sources.RUN does not know, and the RUN lines that the measurements justify (code whose
every group passed when tried). Each pytest output is kept in build/keras3-releases/logs/, named
by the venv's TensorFlow and the Keras release (`tf2.18.1-3.8.0-multi_worker-user.log`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tfdist.env_vars import KERAS3_TRY  # noqa: E402
from tfdist.keras_compat.known_sources import RUN  # noqa: E402 (no TensorFlow, no Keras)

# The tests run on each release, by group (pytest node ids, from the repository's root).
GROUPS = {
    "multi_worker": [
        "tests/distribute/test_same_math.py::test_multi_worker_two_processes[3]",
        "tests/distribute/test_layer_statistics.py::"
        "test_keras3_multi_worker_statistics_are_the_mean_of_every_workers",
    ],
    "mirrored": ["tests/distribute/test_same_math.py::test_mirrored_two_logical_cpus[3]"],
    "parameter_server": ["tests/keras3/test_parameter_server.py"],
    "horovod": ["tests/horovod/test_horovod_keras3.py"],
    "mixed precision (2 replicas)": [
        f"tests/train/test_mixed_precision.py::"
        f"test_mixed_float16_with_two_replicas_scales_the_loss[{case}-3]"
        for case in ("multi_worker", "mirrored", "horovod")
    ],
}
BUILD = REPO / "build" / "keras3-releases"
GROUP_TIMEOUT = 3600  # seconds: pytest's own timeout (setup.cfg) stops a single test before

# tfdist's refusals that a Keras release can cause: a name -> the pattern of its message, as a
# traceback prints it (`...KerasCorrectionUnknown: ...`) or `tfdist COMMAND: error: ...` does.
REFUSALS = {
    "KerasCorrectionUnknown": r"KerasCorrectionUnknown: |does not patch code it has not run",
    "DistributedInputUnsupported": r"DistributedInputUnsupported: |takes no distributed dataset",
    "KerasReplicaLossUnscaled": r"KerasReplicaLossUnscaled: |adds up the gradients of the",
    "OptimizerNotCheckpointable": r"OptimizerNotCheckpointable: |cannot be saved by tf.train.Check",
}
UNKNOWN_CODE = "KerasCorrectionUnknown"  # the refusal that TFDIST_KERAS3_TRY lifts
_CHANGED = re.compile(r"changed ((?:`[\w.]+`(?: or )?)+), which tfdist corrects")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$", re.M)
# An error line, also in a test's report of a task's output (`E   [1] ValueError: ...`).
_EXCEPTION = re.compile(r"^(?:E\s+)?(?:\[\d+\]\s+)?((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Unknown|"
                        r"Unsupported|Failed|Timeout)|tfdist \w+: error): (.+)")

# Run in a subprocess under the overlay: which Keras imports, and each corrected function's source
# hash as Keras defines it (keras_compat.known_sources.functions_here: corrections unwrapped).
CHECK = r"""
import json, os
os.environ.pop("TF_USE_LEGACY_KERAS", None)
import keras
import tensorflow as tf
from tfdist.keras_compat.known_sources import functions_here, source_hash
# Keras < 3.2's tf.keras (keras._tf_keras.keras) has no __version__: then its Model says which.
tf_keras = getattr(tf.keras, "__version__", None) or (
    keras.__version__ if tf.keras.Model is keras.Model else tf.keras.Model.__module__)
print(json.dumps({
    "keras": keras.__version__, "tf_keras": tf_keras, "file": keras.__file__,
    "tensorflow": tf.__version__,
    "hashes": {n: "absent" if f is None else source_hash(f) for n, f in functions_here().items()}}))
"""
# tests/helpers.py's clean_environ drops every TFDIST_* variable from the processes a test starts,
# and keeps PYTHONPATH: the switch reaches them as a sitecustomize on the path, which sets it in
# every Python process started under it.
SWITCH = f'import os\n\nos.environ["{KERAS3_TRY.name}"] = "1"\n'

# ---------------------------------------------------------------------------------------------
# Which releases (pure)


def keras_requirement(metadata: str) -> Requirement | None:
    """The `Requires-Dist: keras ...` of a distribution's METADATA text (None: none)."""
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.name.lower() == "keras" and (not req.marker
                                                or req.marker.evaluate({"extra": ""})):
                return req
    return None


def newest_patches(listing: str, requirement: Requirement | None) -> list[str]:
    """The newest patch of every Keras 3 minor in `pip index versions keras`'s output that
    `requirement` admits, oldest first."""
    found = re.search(r"Available versions: (.*)", listing)
    newest: dict[tuple[int, int], Version] = {}
    for text in found.group(1).split(", ") if found else []:
        v = Version(text.strip())
        if v.major != 3 or v.is_prerelease or (requirement and v not in requirement.specifier):
            continue
        if v > newest.get((v.major, v.minor), Version("0")):
            newest[(v.major, v.minor)] = v
    return [str(newest[k]) for k in sorted(newest)]


def default_versions() -> list[str]:
    metadata = importlib.metadata.distribution("tensorflow").read_text("METADATA") or ""
    listing = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "keras"],
                             capture_output=True,
                             text=True,
                             check=True).stdout
    return newest_patches(listing, keras_requirement(metadata))


# ---------------------------------------------------------------------------------------------
# What a pytest output says (pure)


@dataclasses.dataclass
class Verdict:
    kind: str  # "passes", "fails", "refused" or "skipped"
    detail: str = ""  # the first error line; the refusals' names; the reason of a skip
    refused: tuple[str, ...] = ()  # the refusals seen
    functions: tuple[str, ...] = ()  # RUN names that a KerasCorrectionUnknown named
    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def cell(self) -> str:
        passed, total = self.counts.get("passed", 0), sum(self.counts.values())
        partial = f", {passed} of {total} passed" if 0 < passed < total else ""
        if self.kind == "passes":
            return "passes"
        also = f"; also refused: {', '.join(self.refused)}" if self.kind == "fails" and \
            self.refused else ""
        return f"{self.kind}: {self.detail}{partial}{also}"


def _refusals(text: str) -> tuple[list[str], list[str]]:
    names = [name for name, pattern in REFUSALS.items() if re.search(pattern, text)]
    functions = sorted({
        name
        for found in _CHANGED.findall(text)
        for qualified in re.findall(r"`([\w.]+)`", found)
        for name in RUN if qualified.endswith("." + name)
    })
    return names, functions


def first_error(text: str) -> str:
    """The first line of `text` that names an error (another than an assertion's where there is
    one, and not a heading such as TensorFlow's `...Error: in user code:`), shortened for a table
    cell."""
    errors = [m for m in map(_EXCEPTION.match, map(str.strip, text.splitlines())) if m]
    other = [
        m for m in errors
        if m.group(1) != "AssertionError" and not m.group(2).rstrip().endswith(":")
    ]
    chosen = (other or errors or [None])[0]
    if chosen is not None:
        line = f"{chosen.group(1)}: {chosen.group(2)}"
    else:
        lines = [s.strip() for s in text.splitlines() if s.strip()]
        line = next((s for s in lines if s.startswith(("E ", "ERROR"))),
                    lines[-1] if lines else "no output")
    line = re.sub(r"\s+", " ", line.removeprefix("E ").strip())
    return line if len(line) <= 150 else line[:147] + "..."


def classify(output: str, returncode: int) -> Verdict:
    """A pytest run's verdict from its output (`-q`, with setup.cfg's `-ra`) and exit status."""
    counts = {
        kind.rstrip("s") if kind == "errors" else kind: int(n)
        for n, kind in re.findall(r"(\d+) (passed|failed|errors?|skipped)\b", _summary(output))
    }
    if returncode == 0:
        if counts.get("skipped") and not counts.get("passed"):
            reason = re.search(r"^SKIPPED \[\d+\] [^:]+:\d+: (.+)$", output, re.M)
            return Verdict("skipped", reason.group(1) if reason else "", counts=counts)
        return Verdict("passes", counts=counts)
    sections = _failures(output) or [output]
    refused, functions, failed = [], [], None
    for section in sections:
        names, named = _refusals(section)
        refused += [n for n in names if n not in refused]
        functions += [f for f in named if f not in functions]
        if not names and failed is None:
            failed = section
    if failed is None and refused:
        return Verdict("refused", ", ".join(refused), tuple(refused), tuple(functions), counts)
    return Verdict("fails", first_error(failed or output), tuple(refused), tuple(functions), counts)


def _summary(output: str) -> str:
    lines = [s for s in output.splitlines() if re.search(r" in [\d.]+s\b", s)]
    return lines[-1] if lines else ""


def _failures(output: str) -> list[str]:
    """The text of each failure or error section of pytest's report."""
    end = re.search(r"^=+ short test summary info =+$", output, re.M)
    report = output[:end.start()] if end else output
    heads = list(_SECTION.finditer(report))
    return [
        report[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(report)]
        for i, h in enumerate(heads)
    ]


# ---------------------------------------------------------------------------------------------
# Measuring


def overlay(version: str) -> Path:
    """build/keras3-releases/VERSION, holding Keras `version` alone (installed once)."""
    target = BUILD / version
    if not (target / "keras" / "__init__.py").exists():
        BUILD.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=BUILD))
        subprocess.run([
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
            str(partial), f"keras=={version}"
        ],
                       check=True)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target


def check(version: str, path: Path) -> dict:
    """What a process under the overlay imports: the Keras asked for, or SystemExit."""
    r = subprocess.run([sys.executable, "-c", CHECK],
                       env=environ(path, try_unknown=False, TF_CPP_MIN_LOG_LEVEL="3"),
                       capture_output=True,
                       text=True,
                       cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"Keras {version} from {path} does not import:\n{r.stderr[-3000:]}")
    found = json.loads(r.stdout.strip().splitlines()[-1])
    overlaid = found["file"].startswith(str(path))
    if not overlaid or (found["keras"], found["tf_keras"]) != (version, version):
        raise SystemExit(f"PYTHONPATH={path}: `import keras` gave {found['keras']} from "
                         f"{found['file']} and tf.keras {found['tf_keras']}, not {version}")
    return found


def environ(path: Path, try_unknown: bool, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (KERAS3_TRY.name, "PYTHONPATH")}
    paths = [path]
    if try_unknown:
        switch = BUILD / "try-switch"
        switch.mkdir(parents=True, exist_ok=True)
        (switch / "sitecustomize.py").write_text(SWITCH)
        paths.insert(0, switch)
        env[KERAS3_TRY.name] = "1"
    env["PYTHONPATH"] = os.pathsep.join(map(str, paths))
    env.update(extra)
    return env


def run_group(version: str,
              path: Path,
              group: str,
              try_unknown: bool,
              reuse: bool = False) -> tuple[Verdict, float]:
    """The group's pytest run on this release; with `reuse`, the one kept in BUILD/logs if any."""
    mode = "tried" if try_unknown else "user"
    tf = importlib.metadata.version("tensorflow")
    name = f"tf{tf}-{version}-{re.sub(r'[^a-z0-9]+', '_', group.lower()).strip('_')}-{mode}"
    log, record = BUILD / "logs" / f"{name}.log", BUILD / "logs" / f"{name}.json"
    if reuse and log.exists() and record.exists():
        output, ran = log.read_text(), json.loads(record.read_text())
    else:
        output, ran = _pytest(GROUPS[group], environ(path, try_unknown), name)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output)
        record.write_text(json.dumps(ran))
    if ran["returncode"] is None:
        return Verdict("fails", f"timed out after {GROUP_TIMEOUT} s"), ran["seconds"]
    return classify(output, ran["returncode"]), ran["seconds"]


def _pytest(tests: list[str], env: dict[str, str], name: str) -> tuple[str, dict]:
    """pytest's output, exit status (None: timed out) and wall time."""
    basetemp = Path(tempfile.gettempdir()) / "tfdist-keras3-releases" / name
    basetemp.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}"] +
        tests,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=GROUP_TIMEOUT)
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # pytest and the processes its tests started
        output, _ = proc.communicate()
        returncode = None
    except BaseException:  # interrupted (SIGINT, or SIGTERM: see main): nothing left running
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    shutil.rmtree(basetemp, ignore_errors=True)
    return output, {"returncode": returncode, "seconds": round(time.monotonic() - start, 1)}


@dataclasses.dataclass
class Result:
    user: Verdict
    seconds: float
    tried: Verdict | None = None
    tried_seconds: float = 0.0

    def passes(self) -> bool:
        """Whether the group passed, as a user runs it or with the switch."""
        return (self.tried or self.user).kind == "passes"

    def cell(self) -> str:
        text = f"{self.user.cell()} ({self.seconds:.0f} s)"
        if self.tried is None:
            return text
        tried = "passes when tried" if self.tried.kind == "passes" else \
            f"when tried: {self.tried.cell()}"
        return f"{self.user.cell()} ({tried}; {self.seconds:.0f} s + {self.tried_seconds:.0f} s)"


def measure(version: str, path: Path, group: str, reuse: bool) -> Result:
    verdict, seconds = run_group(version, path, group, False, reuse)
    result = Result(verdict, seconds)
    if UNKNOWN_CODE in verdict.refused:
        result.tried, result.tried_seconds = run_group(version, path, group, True, reuse)
    return result


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group",
                        action="append",
                        choices=list(GROUPS),
                        help="a group of GROUPS to run (default: all of them)")
    parser.add_argument("--reuse",
                        action="store_true",
                        help="read a group's run kept in build/keras3-releases/logs instead of "
                        "running it again (to print the table again)")
    parser.add_argument("versions", nargs="*")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    groups = args.group or list(GROUPS)
    versions = sorted(args.versions or default_versions(), key=Version)
    print(f"Keras releases: {', '.join(versions)}", file=sys.stderr, flush=True)
    rows, unknown_rows, run_lines = [], [], []
    for version in versions:
        path = overlay(version)
        found = check(version, path)
        unknown = {n: h for n, h in found["hashes"].items() if h != "absent" and h not in RUN[n]}
        results = {}
        for group in groups:
            results[group] = measure(version, path, group, args.reuse)
            print(f"Keras {version}: {group}: {results[group].cell()}", file=sys.stderr, flush=True)
        rows.append(f"| {found['tensorflow']} | {version} | " +
                    " | ".join(_cell(results[g].cell()) for g in groups) + " |")
        if unknown:
            listed = ", ".join(f"`{n}` {h}" for n, h in unknown.items())
            unknown_rows.append(f"- Keras {version}: {listed}")
        tried = {f for r in results.values() if r.tried for f in r.user.functions}
        if all(r.passes() for r in results.values()):
            run_lines += [(n, h, version, found["tensorflow"]) for n, h in unknown.items()
                          if n in tried]
    print("| TensorFlow | Keras | " + " | ".join(groups) + " |")
    print("|---|---" + "|---" * len(groups) + "|")
    print("\n".join(rows))
    print("\nSources that known_sources.RUN does not know:")
    print("\n".join(unknown_rows) or "- none")
    print("\nRUN lines to add (every group passed when tried):")
    print("\n".join(f'    "{n}": {{"{h}": ("{v}", )}},  # Keras {v}, TensorFlow {tf}'
                    for n, h, v, tf in run_lines) or "- none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
