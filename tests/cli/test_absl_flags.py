"""An absl script's own flags beside tfdist's (tfdist.cli.flags.define_flags): a flag of the
script's that tfdist defines too is refused at once, naming it and the fix. Before, define_flags
returned early when --batch_size existed: tfdist's other flags went undefined and the script failed
later in init_from_flags on FLAGS.lr_scaling (a subprocess each: absl's FLAGS is global)."""

import sys

from tests.helpers import run

SCRIPT = '''
from absl import app, flags
{own}
from tfdist.cli import flags as tfdist_flags

tfdist_flags.define_flags()
tfdist_flags.define_flags()  # twice: nothing more


def main(argv):
    print("lr_scaling", flags.FLAGS.lr_scaling, "batch_size", flags.FLAGS.batch_size)


app.run(main)
'''


def script(tmp_path, own: str) -> list[str]:
    path = tmp_path / "mine.py"
    path.write_text(SCRIPT.format(own=own))
    return [sys.executable, str(path), "--batch_size=16"]


def test_tfdists_flags_beside_the_scripts_own(tmp_path):
    r = run(script(tmp_path, 'flags.DEFINE_integer("epochs", 3, "mine")'), timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "lr_scaling linear batch_size 16"


def test_a_flag_tfdist_defines_too_is_refused_naming_it_and_the_fix(tmp_path):
    r = run(script(tmp_path, 'flags.DEFINE_integer("batch_size", 64, "mine")'), timeout=120)
    assert r.returncode != 0
    assert (f"DuplicateFlagError: --batch_size is defined by {tmp_path / 'mine.py'} before "
            "tfdist_flags.define_flags() defines it too (tfdist's is the batch per replica: "
            "rt.global_batch_size(FLAGS.batch_size) is the global one). Fix: drop the script's "
            "--batch_size and read FLAGS.batch_size, which tfdist defines") in r.stderr, r.stderr
