"""Run by every task under srun: `tfdist env --format=json ARGS`, recorded together with where the
task really runs (Slurm's node name, the addresses of its network namespace).

    srun .venv/bin/python task_env.py OUT_DIR [tfdist env flags...]

Writes OUT_DIR/task-<SLURM_PROCID>.json. Exits with tfdist env's status.
"""

import json
import os
import socket
import subprocess
import sys


def main() -> int:
    out_dir, args = sys.argv[1], sys.argv[2:]
    tfdist = os.path.join(os.path.dirname(sys.executable), "tfdist")
    proc = subprocess.run([tfdist, "env", "--format=json", *args], capture_output=True, text=True)
    addrs = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                           capture_output=True,
                           text=True).stdout
    record = {
        "procid": int(os.environ["SLURM_PROCID"]),
        "slurmd_nodename": os.environ.get("SLURMD_NODENAME"),
        "hostname": socket.gethostname(),
        "addresses": [line.split()[3].split("/")[0] for line in addrs.splitlines()],
        "returncode": proc.returncode,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
        "env": json.loads(proc.stdout) if proc.returncode == 0 else None,
        "slurm": {
            k: v
            for k, v in os.environ.items() if k.startswith("SLURM")
        },
    }
    path = os.path.join(out_dir, f"task-{record['procid']}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
    os.replace(path + ".tmp", path)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
