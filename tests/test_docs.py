"""The docs site builds with warnings as errors and its reference covers the code: every flag that
`tfdist COMMAND --help` lists, every public name of the API, every TFDIST_* variable.

The flags are read from --help (what a user sees), not from the generator's own introspection,
so a command or flag the generator misses fails here."""

import dataclasses
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cannot_run import unless

# Builds the site and runs every command's --help. The default stack's: the site and the reference
# are tfdist's own (`make test` installs the docs extra there, `make test-newest` does not).
pytestmark = [pytest.mark.slow, pytest.mark.default_stack]
try:
    import mkdocs  # noqa: F401
except ImportError:
    pytestmark.append(
        unless(False, "the docs extra (mkdocs) is not installed", "`make docs` installs it"))

from tfdist import env_vars  # noqa: E402
from tfdist.cli.main import COMMANDS  # noqa: E402

from tests.helpers import WAIT  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
_FLAG = re.compile(r"^\s+(?:-\w,)?--(?:\[no\])?(\w+)[:=]", re.M)
# Appears in tfdist's code as a marker in a probe's output, not as an environment variable.
NOT_VARIABLES = {"TFDIST_DOCTOR_PROBE"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
         str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        timeout=WAIT)
    assert build.returncode == 0, build.stderr[-5000:]
    assert "WARNING" not in build.stderr, build.stderr[-5000:]
    return out


def text_of(page: Path) -> str:
    """The visible text of a built page (tags removed, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))


def section(page_html: str, anchor: str) -> str:
    """The HTML from the heading with id=anchor to the next heading of the same level."""
    start = page_html.index(f'id="{anchor}"')
    level = page_html.rfind("<h", 0, start)
    tag = page_html[level:level + 3]
    end = page_html.find(tag, start)
    return page_html[start:end if end > 0 else len(page_html)]


def help_flags(command: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "tfdist.cli.main", command, "--help"],
                         cwd=REPO,
                         capture_output=True,
                         text=True,
                         timeout=WAIT)
    names = _FLAG.findall(out.stdout + out.stderr)
    assert names, f"tfdist {command} --help listed no flags:\n{out.stdout}{out.stderr}"
    return names


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_flag_of_the_command_is_in_the_cli_reference(site, command):
    page = (site / "reference" / "cli.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", " ", section(page, f"tfdist-{command}")))
    missing = [name for name in help_flags(command) if f"--{name}" not in text]
    assert not missing, f"tfdist {command}: flags in --help but not in the CLI reference: {missing}"


def test_every_public_name_is_in_the_api_reference(site):
    import tfdist
    import tfdist.data
    from tfdist.runtime import Runtime
    from tfdist.train.callbacks import CallbackOptions

    page = (site / "reference" / "api.html").read_text()
    ids = set(re.findall(r'id="([\w.]+)"', page))
    wanted = [
        "tfdist.init", "tfdist.TfdistError", "tfdist.runtime.init", "pipelines.load_pipeline",
        "pipelines.digits.info", "pipelines.digits.dataset",
        "tfdist.train.callbacks.training_callbacks", "tfdist.train.callbacks.CallbackOptions",
        "tfdist.train.preemption.Preempted", "tfdist.train.checkpoint.Resume",
        "tfdist.cli.flags.init_from_flags"
    ]
    wanted += [
        f"tfdist.runtime.Runtime.{name}" for name in vars(Runtime) if not name.startswith("_")
    ]
    wanted += [f"tfdist.data.{name}" for name in tfdist.data.__all__]
    missing = [name for name in wanted if name not in ids]
    assert not missing, f"public names without an entry in the API reference: {missing}"
    options = html.unescape(
        re.sub(r"<[^>]+>", " ", section(page, "tfdist.train.callbacks.CallbackOptions")))
    params = [f.name for f in dataclasses.fields(CallbackOptions)]
    assert [p for p in params if p not in options] == [], "rt.callbacks options not documented"
    assert callable(tfdist.init)


def test_every_tfdist_variable_is_in_the_registry_and_the_docs(site):
    """Each TFDIST_* name used in the package, the job scripts, the tools or the benchmarks is in
    tfdist/env_vars.py, and each of those is on the generated page."""
    used = set()
    for folder in ("tfdist", "pipelines", "jobs", "tools", "bench"):
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".sh", ".sbatch", ".md", ".cfg"):
                used |= set(re.findall(r"\bTFDIST_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    registered = {var.name for var in env_vars.VARIABLES}
    assert sorted(used - registered - NOT_VARIABLES) == [], "add them to tfdist/env_vars.py"
    page = text_of(site / "reference" / "environment.html")
    assert [name for name in registered if name not in page] == []


def test_the_committed_reference_pages_are_what_the_code_generates():
    """docs/reference/api.md, cli.md and environment.md are committed (they read on GitHub too)
    and must not drift from the docstrings, the flag definitions and tfdist/env_vars.py (the build
    also warns)."""
    out = subprocess.run([sys.executable, "tools/docs/reference.py", "--check"],
                         cwd=REPO,
                         capture_output=True,
                         text=True,
                         timeout=WAIT)
    assert out.returncode == 0, out.stderr


def test_the_built_site_loads_nothing_from_outside(site):
    """No stylesheet, script, font or image from another host: the site works offline (Material
    would load Google Fonts unless `theme.font: false`)."""
    remote = re.compile(r'<(?:link|script|img|source)\b[^>]*(?:href|src)="(?:https?:)?//', re.I)
    for page in site.rglob("*.html"):
        assert not remote.search(page.read_text()), page
    for sheet in site.rglob("*.css"):
        assert not re.search(r"url\(['\"]?(?:https?:)?//", sheet.read_text()), sheet
