#!/usr/bin/env python3
"""A/B of two jobtop builds as clients of one serve, alternating, N rounds (default 150): submit ->
the submit process exiting, -> `started` (the store's record), -> the job's `date`; `status`;
`--version`. The serve is AFTER's.

Usage: Scripts/bench-client-ab.py BEFORE AFTER [N]
"""
import os, sqlite3, statistics, subprocess, sys, tempfile, time
from serve_latency import percentile, submit_latency

work = tempfile.mkdtemp(prefix="jobtop-bench-client-ab-")
env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(work, "run"), XDG_STATE_HOME=os.path.join(work, "state"))
builds = {"before": os.path.abspath(sys.argv[1]), "after": os.path.abspath(sys.argv[2])}
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 150
load = lambda: open("/proc/loadavg").read().split()[0]

serve = subprocess.Popen([builds["after"], "serve", "-j", "2"], env=env, stderr=subprocess.PIPE, text=True)
serve.stderr.readline()  # "listening on ..."
database = sqlite3.connect(f"file:{os.path.join(work, 'state', 'jobtop', 'jobtop.db')}?mode=ro", uri=True)


def timed(arguments):
    start = time.perf_counter_ns()
    subprocess.run(arguments, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter_ns() - start) / 1e6


figures = {name: {"exit": [], "started": [], "running": [], "status": [], "version": []} for name in builds}
load_start = load()
for round in range(rounds):
    for name, binary in builds.items():
        exited, started, running = submit_latency(binary, env, work, database, f"{name}{round}")
        figures[name]["exit"].append(exited)
        figures[name]["started"].append(started)
        figures[name]["running"].append(running)
        figures[name]["status"].append(timed([binary, "status"]))
        figures[name]["version"].append(timed([binary, "--version"]))
for name in builds:
    print(name, "  ".join(f"{what} p50 {statistics.median(v):.2f} p99 {percentile(v, 99):.2f}" for what, v in figures[name].items()))
print(f"load {load_start} -> {load()}")
serve.terminate()
serve.wait()
