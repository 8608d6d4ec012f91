#!/usr/bin/env bash
# Scale benchmark (issue "Hardening"): a plain list of any length, release build, one run.
#   1. per-job wall time of a LARGE-line list against a SMALL-line list (goal: within 1.3x),
#      and the peak RSS of both (goal for 1,000,000 lines: under 300 MB);
#   2. time from the first line written to jobtop's stdin to its first `started` event
#      (goal: under 50 ms), median of 20 tries;
#   3. SIGINT honoured while a huge list is being submitted and run (goal: exit within 100 ms).
# A per-event O(jobs) cost (a dictionary copied per event, say) shows as a ratio far above 1.
#
#   Scripts/bench-scale.sh                       # SMALL=2000 LARGE=1000000
#   SMALL=2000 LARGE=100000 Scripts/bench-scale.sh
#   JOBTOP=.build/release/jobtop Scripts/bench-scale.sh   # an already built binary
set -euo pipefail
cd "$(dirname "$0")/.."

SMALL=${SMALL:-2000}
LARGE=${LARGE:-1000000}

if [ -z "${JOBTOP:-}" ]; then   # JOBTOP=path/to/release/jobtop skips the build
    swift build -c release --product jobtop > /dev/null
    JOBTOP=$(swift build -c release --show-bin-path)/jobtop
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"

measure() {  # N -> "seconds maxrss_kb"
    awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print "true" }' > "$work/l.txt"
    /usr/bin/time -f "%e %M" -o "$work/time" "$JOBTOP" "$work/l.txt" -j 2 --headless > /dev/null
    cat "$work/time"
}

read -r small_s small_kb <<< "$(measure "$SMALL")"
read -r large_s large_kb <<< "$(measure "$LARGE")"
awk -v s="$SMALL" -v ss="$small_s" -v sk="$small_kb" -v l="$LARGE" -v ls="$large_s" -v lk="$large_kb" 'BEGIN {
    printf "list of %9d lines: %8.2f s  %7.3f ms/job  peak RSS %6.1f MB\n", s, ss, 1000 * ss / s, sk / 1024
    printf "list of %9d lines: %8.2f s  %7.3f ms/job  peak RSS %6.1f MB\n", l, ls, 1000 * ls / l, lk / 1024
    printf "per-job time, large / small = %.2fx   (goal <= 1.3x); peak RSS goal for 1,000,000 lines: < 300 MB\n", (ls / l) / (ss / s)
}'

python3 - "$JOBTOP" <<'PY'
import os, signal, statistics, subprocess, sys, time
jobtop = sys.argv[1]

# 2. first `started` after the first line on stdin
latencies = []
for _ in range(20):
    p = subprocess.Popen([jobtop, "-j", "2", "--log-format", "json"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    time.sleep(0.2)  # let it start and wait on stdin
    t0 = time.monotonic()
    p.stdin.write(b"true\n")
    for line in iter(p.stdout.readline, b""):
        if b'"event":"started"' in line:
            latencies.append(time.monotonic() - t0)
            break
    p.stdin.close()
    p.wait()
print("first `started` after the first stdin line: median %.1f ms, max %.1f ms (20 tries; goal < 50 ms)"
      % (1000 * statistics.median(latencies), 1000 * max(latencies)))

# 3. SIGINT during a huge list
with open("/tmp/jobtop-bench-sigint.txt", "w") as f:
    f.write("sleep 0.01\n" * 2_000_000)
for delay in (0.05, 1.0, 3.0):
    p = subprocess.Popen([jobtop, "/tmp/jobtop-bench-sigint.txt", "-j", "2", "--headless"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    status = p.wait()
    print("SIGINT %.2f s into a 2,000,000-line list: exited %d after %.0f ms (goal < 100 ms)"
          % (delay, status if status >= 0 else 128 - status, 1000 * (time.monotonic() - t0)))
os.unlink("/tmp/jobtop-bench-sigint.txt")
PY
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
