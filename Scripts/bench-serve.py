#!/usr/bin/env python3
"""jobtop serve figures (release): submit -> started latency, and attach's first frame with
100,000 jobs.

Usage: swift build -c release --scratch-path .build-release --product jobtop
       Scripts/bench-serve.py [.build-release/release/jobtop]

1. `jobtop submit -c 'date +%s%N > F'` run 200 times, one at a time, against a serve with 2
   slots: the time from just before the submit process is started to (a) the submit process
   exiting (ids printed), (b) the serve's store recording the `started` event (the attempt's
   `started_at`: the wall clock when the store journals it, a bound from above on the event), and
   (c) the job's `date` running (which adds the job's sh and date start-up).
2. 100,000 queued jobs (the serve paused; submitted as one list on stdin), then `jobtop attach`
   in a 120x40 tmux window: the time from the key that starts it to the screen showing the
   100,000 queued jobs, polled every 2 ms (so it includes tmux's capture and jobtop's start-up).
3. The serve shut down with those jobs queued and started again: the time from its start to its
   "listening" line, and to the first frame of an attach started at that line.
"""
import os, sqlite3, subprocess, sys, tempfile, time, shutil
from serve_latency import percentile, submit_latency

binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build-release/release/jobtop")
work = tempfile.mkdtemp(prefix="jobtop-bench-serve-")
env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(work, "run"), XDG_STATE_HOME=os.path.join(work, "state"))
load = lambda: open("/proc/loadavg").read().split()[0]

serve = subprocess.Popen([binary, "serve", "-j", "2"], env=env, stderr=subprocess.PIPE, text=True)
serve.stderr.readline()  # "listening on ..."

database = sqlite3.connect(f"file:{os.path.join(work, 'state', 'jobtop', 'jobtop.db')}?mode=ro", uri=True)
submit_ms, recorded_ms, started_ms = zip(*(submit_latency(binary, env, work, database, i) for i in range(200)))
print(f"submit -c: process exits (ids printed) p50 {percentile(submit_ms, 50):.2f} ms, p99 {percentile(submit_ms, 99):.2f} ms; "
      f"`started` (as the serve's store recorded it) p50 {percentile(recorded_ms, 50):.2f} ms, p99 {percentile(recorded_ms, 99):.2f} ms; "
      f"job running (its date) p50 {percentile(started_ms, 50):.2f} ms, p99 {percentile(started_ms, 99):.2f} ms "
      f"(200 runs, load {load()})")

subprocess.run([binary, "clean"], env=env, check=True, stdout=subprocess.DEVNULL)
subprocess.run([binary, "pause"], env=env, check=True)
jobs = "".join(f"true # {i}\n" for i in range(100_000))
t0 = time.time()
subprocess.run([binary, "submit", "-"], env=env, input=jobs, text=True, check=True, stdout=subprocess.DEVNULL)
print(f"durable submit of 100,000 jobs (a list on stdin, one transaction): {time.time() - t0:.2f} s (load {load()})")

def first_frame(tmux, t0=None):
    """Presses Enter on the typed `jobtop attach` (at t0 if given, else now) and waits for the
    frame that shows the 100,000 queued jobs; the time from t0 in ms."""
    t0 = t0 or time.time()
    tmux("send-keys", "-t", "0", "Enter")
    while True:
        screen = tmux("capture-pane", "-p", "-t", "0").stdout
        if "100000 queued" in screen or "100,000 queued" in screen or "100k queued" in screen:
            return (time.time() - t0) * 1000
        if time.time() - t0 > 60:
            print("attach: no frame with the jobs within 60 s; screen:\n" + screen)
            return float("nan")
        time.sleep(0.002)

if shutil.which("tmux"):
    sock = f"jobtop-bench-{os.getpid()}"
    tmux = lambda *a: subprocess.run(["tmux", "-L", sock, *a], capture_output=True, text=True)
    tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", f"cd {work} && exec env PS1='$ ' /bin/sh")
    attach = f"XDG_RUNTIME_DIR={env['XDG_RUNTIME_DIR']} {binary} attach"
    frames = []
    for attempt in range(3):
        tmux("send-keys", "-t", "0", "-l", attach)
        time.sleep(0.3)
        frames.append(first_frame(tmux))
        tmux("send-keys", "-t", "0", "q")
        time.sleep(0.5)
    print(f"attach, first frame with 100,000 queued jobs: {', '.join(f'{f:.0f}' for f in frames)} ms (load {load()})")

    # Restart: serve stopped with the 100,000 jobs queued; the time from starting it again to
    # attach's first frame showing them (attach started the moment serve says it listens).
    restarts = []
    for attempt in range(3):
        subprocess.run([binary, "shutdown"], env=env, stderr=subprocess.DEVNULL)
        serve.wait()
        tmux("send-keys", "-t", "0", "-l", attach)
        time.sleep(0.3)
        t0 = time.time()
        serve = subprocess.Popen([binary, "serve", "-j", "2"], env=env, stderr=subprocess.PIPE, text=True)
        serve.stderr.readline()
        listening = (time.time() - t0) * 1000
        frame = first_frame(tmux, t0)
        restarts.append((listening, frame))
        tmux("send-keys", "-t", "0", "q")
        time.sleep(0.5)
    print("restart with 100,000 queued jobs -> listening, -> attach's first frame: "
          + ", ".join(f"{l:.0f}/{f:.0f}" for l, f in restarts) + f" ms (load {load()})")
    tmux("kill-server")

subprocess.run([binary, "shutdown"], env=env, stderr=subprocess.DEVNULL)
serve.wait()
shutil.rmtree(work, ignore_errors=True)
