#!/usr/bin/env python3
"""A/B of serve's restart and attach with 100,000 queued jobs, for two (or more) builds.

Usage: Scripts/bench-serve-ab.py WORKDIR ROUNDS BINARY...

Per round and binary: serve started on a state directory holding 100,000 queued jobs (made in
WORKDIR by the first binary if it is not there yet); the time to its "listening" line, to the
first frame of an attach started at that line, then to the first frame of a second attach on the
warm serve. The binaries alternate, so a busy machine weighs on all of them alike: a comparison
that holds under load, where two separate runs of Scripts/bench-serve.py would not.
"""
import os, subprocess, sys, time
W = os.path.abspath(sys.argv[1]); rounds = int(sys.argv[2]); bins = [os.path.abspath(b) for b in sys.argv[3:]]
env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(W, "run"), XDG_STATE_HOME=os.path.join(W, "state"))
if not os.path.exists(os.path.join(W, "state")):
    os.makedirs(os.path.join(W, "run"), exist_ok=True)
    serve = subprocess.Popen([bins[0], "serve", "-j", "2"], env=env, stderr=subprocess.PIPE, text=True)
    while "listening" not in serve.stderr.readline(): pass
    subprocess.run([bins[0], "pause"], env=env, check=True)
    subprocess.run([bins[0], "submit", "-"], env=env, check=True, stdout=subprocess.DEVNULL,
                   input="".join(f"true # {i}\n" for i in range(100_000)), text=True)
    subprocess.run([bins[0], "shutdown"], env=env, stderr=subprocess.DEVNULL)
    serve.wait()
load = lambda: open("/proc/loadavg").read().split()[0]
sock = f"hr-ab-{os.getpid()}"
tmux = lambda *a: subprocess.run(["tmux", "-L", sock, *a], capture_output=True, text=True)
tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", f"cd {W} && exec env PS1='$ ' /bin/sh")
def frame(t0):
    tmux("send-keys", "-t", "0", "Enter")
    while True:
        s = tmux("capture-pane", "-p", "-t", "0").stdout
        if "100000 queued" in s or "100,000 queued" in s or "100k queued" in s: return (time.time() - t0) * 1000
        if time.time() - t0 > 60: return float("nan")
        time.sleep(0.002)
results = {b: [] for b in bins}
for r in range(rounds):
    for b in bins:
        attach = f"XDG_RUNTIME_DIR={env['XDG_RUNTIME_DIR']} {b} attach"
        tmux("send-keys", "-t", "0", "-l", attach); time.sleep(0.3)
        t0 = time.time()
        serve = subprocess.Popen([b, "serve", "-j", "2"], env=env, stderr=subprocess.PIPE, text=True)
        while "listening" not in serve.stderr.readline(): pass
        listening = (time.time() - t0) * 1000
        f1 = frame(t0)
        tmux("send-keys", "-t", "0", "q"); time.sleep(0.5)
        tmux("send-keys", "-t", "0", "-l", attach); time.sleep(0.3)
        f2 = frame(time.time())
        tmux("send-keys", "-t", "0", "q"); time.sleep(0.5)
        subprocess.run([b, "shutdown"], env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        serve.wait()
        results[b].append((listening, f1, f2, load()))
tmux("kill-server")
for b in bins:
    print(os.path.basename(b) + ": restart->listening / ->first frame / warm attach first frame (load): "
          + ", ".join(f"{l:.0f}/{f1:.0f}/{f2:.0f} ({ld})" for l, f1, f2, ld in results[b]))
    med = lambda i: sorted(x[i] for x in results[b])[len(results[b]) // 2]
    print(f"   medians: {med(0):.0f} / {med(1):.0f} / {med(2):.0f} ms")
