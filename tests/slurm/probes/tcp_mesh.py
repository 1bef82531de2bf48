"""Run by every task under srun: prove the network path between the tasks of different nodes.

Each task asks `tfdist env --strategy=multi_worker` for its TF_CONFIG, listens on its own worker
address (host:port, the host resolved as any TensorFlow server would), then connects to every
other task's address and exchanges one line. Writes OUT_DIR/tcp-<rank>.json: the address it
bound, the peers that connected (with the source address the kernel saw) and the replies it got.
Also asks the controller about the job (`scontrol show job`) from inside the node's namespace.
Every wait is bounded (DEADLINE seconds); exits 1 if any exchange failed.

    srun .venv/bin/python tcp_mesh.py OUT_DIR
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

DEADLINE = 60.0


def main() -> int:
    out_dir = sys.argv[1]
    tfdist = os.path.join(os.path.dirname(sys.executable), "tfdist")
    info = json.loads(
        subprocess.run([tfdist, "env", "--format=json", "--strategy=multi_worker"],
                       check=True,
                       capture_output=True,
                       text=True).stdout)
    rank, workers = info["rank"], info["tf_config"]["cluster"]["worker"]
    node = os.environ.get("SLURMD_NODENAME")
    host, port = workers[rank].rsplit(":", 1)
    own_ip = socket.gethostbyname(host)
    start = time.monotonic()

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((own_ip, int(port)))
    server.listen(len(workers))
    server.settimeout(1.0)
    accepted = []

    def serve():
        while len(accepted) < len(workers) - 1 and time.monotonic() - start < DEADLINE:
            try:
                conn, (peer_ip, _) = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                line = conn.makefile().readline().split()
                conn.sendall(f"ack {rank} {node}\n".encode())
            accepted.append({"from_rank": int(line[1]), "from_node": line[2], "peer_ip": peer_ip})

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    connected, errors = [], []
    for other, address in enumerate(workers):
        if other == rank:
            continue
        peer_host, peer_port = address.rsplit(":", 1)
        while True:
            try:
                with socket.create_connection((peer_host, int(peer_port)), timeout=5) as s:
                    s.sendall(f"hello {rank} {node}\n".encode())
                    reply = s.makefile().readline().split()
                connected.append({"to_rank": other, "address": address, "reply": reply})
                break
            except OSError as e:  # the peer may not be listening yet
                if time.monotonic() - start > DEADLINE:
                    errors.append(f"connect to rank {other} at {address}: {e}")
                    break
                time.sleep(0.2)
    thread.join(max(0.0, DEADLINE - (time.monotonic() - start)) + 1)
    server.close()

    ctl = subprocess.run(["scontrol", "show", "job", os.environ["SLURM_JOB_ID"]],
                         capture_output=True,
                         text=True,
                         timeout=30)
    record = {
        "rank": rank,
        "node": node,
        "bound": [own_ip, int(port)],
        "accepted": sorted(accepted, key=lambda a: a["from_rank"]),
        "connected": connected,
        "errors": errors,
        "scontrol_rc": ctl.returncode,
        "scontrol_state": [w for w in ctl.stdout.split() if w.startswith("JobState=")],
    }
    with open(os.path.join(out_dir, f"tcp-{rank}.json"), "w") as f:
        json.dump(record, f, indent=1)
    ok = not errors and len(accepted) == len(workers) - 1 and ctl.returncode == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
