#!/usr/bin/env bash
# Many remote workers against one coordinator (issue 14, "Scale"): release build, one machine.
#   Phase 1: a coordinator (`jobtop run --listen -j 0`) whose one job holds until told; WORKERS
#            `jobtop worker --slots SLOTS` processes join it. Reports the time for all to join,
#            the coordinator's and the workers' CPU while idle (heartbeats only) as % of one
#            core, and each worker's memory (RSS of the worker and of its guard).
#   Phase 2: that coordinator ends; a second one on the same port runs JOBS `true` jobs; the
#            same workers rejoin it (reconnect with backoff) and run them. Reports every job
#            ending once (from the JSON log), the wall time, and the coordinator's CPU per job.
#
#   Scripts/bench-workers.sh                        # WORKERS=100 SLOTS=4 JOBS=20000 IDLE=10
#   WORKERS=20 JOBS=2000 Scripts/bench-workers.sh
#   HEARTBEAT=2s Scripts/bench-workers.sh             # idle cost at another heartbeat interval
#   JOBTOP=.build-release/release/jobtop Scripts/bench-workers.sh   # an already built binary
#   WORKER_JOBTOP=path/to/other/jobtop ...          # the workers from another build (mixed versions)
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${WORKERS:-100}
SLOTS=${SLOTS:-4}
JOBS=${JOBS:-20000}
IDLE=${IDLE:-10}           # seconds of idle CPU sampling
HEARTBEAT=${HEARTBEAT:-1s} # jobtop run --heartbeat
PORT=${PORT:-$((20000 + RANDOM % 20000))}

if [ -z "${JOBTOP:-}" ]; then   # JOBTOP=path/to/release/jobtop skips the build
    swift build -c release --scratch-path .build-release --product jobtop > /dev/null
    JOBTOP=$(swift build -c release --scratch-path .build-release --show-bin-path)/jobtop
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
# "quiet (load L)" below a load of 1, "busy (load L)" above: busy figures do not hold.
loadlabel() { awk '{ printf "%s (load %s)", ($1 < 1 ? "quiet" : "busy"), $1 }' /proc/loadavg; }
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"

# CPU ticks (user + system) of the given pids, summed; a pid that is gone counts 0.
ticks() {
    local total=0 pid fields
    for pid in "$@"; do
        if fields=$(cut -d')' -f2- "/proc/$pid/stat" 2>/dev/null); then
            set -- $fields
            total=$((total + ${12} + ${13}))
        fi
    done
    echo "$total"
}
hz=$(getconf CLK_TCK)

# The coordinator's log: workers joined so far.
joined() { grep -c '"event":"worker-joined"' "$1" 2>/dev/null || true; }

echo "$(head -c 18 /dev/urandom | base64)" > "$work/token"

# --- Phase 1: join and idle ----------------------------------------------------------------
"$JOBTOP" run --listen "127.0.0.1:$PORT" --token-file "$work/token" -j 0 --headless --log-format json \
    --heartbeat "$HEARTBEAT" -c "while [ ! -e '$work/go' ]; do sleep 0.1; done" > "$work/log1" 2> "$work/err1" &
coordinator=$!
pids+=("$coordinator")
for _ in $(seq 200); do grep -q "accepting workers" "$work/err1" && break; sleep 0.05; done
grep -q "accepting workers" "$work/err1" || { echo "the coordinator did not start:"; cat "$work/err1"; exit 1; }

start=$(date +%s.%N)
workers=()
for i in $(seq "$WORKERS"); do
    "${WORKER_JOBTOP:-$JOBTOP}" worker --connect "127.0.0.1:$PORT" --slots "$SLOTS" --name "w$i" --token-file "$work/token" \
        2> "$work/worker-$i.err" &
    workers+=($!)
    pids+=($!)
done
spawned=$(date +%s.%N)
while [ "$(joined "$work/log1")" -lt "$WORKERS" ]; do
    sleep 0.05
    if [ "$(echo "$(date +%s.%N) - $start > 300" | bc)" = 1 ]; then
        echo "only $(joined "$work/log1") of $WORKERS workers joined in 300 s"; exit 1
    fi
done
all=$(date +%s.%N)
printf 'join: %d workers x %d slots: all joined %.2f s after the first was started (starting them took %.2f s); %s\n' \
    "$WORKERS" "$SLOTS" "$(echo "$all - $start" | bc)" "$(echo "$spawned - $start" | bc)" "$(loadlabel)"

sleep 2   # let the join settle before sampling idle CPU
c0=$(ticks "$coordinator"); w0=$(ticks "${workers[@]}"); t0=$(date +%s.%N)
sleep "$IDLE"
c1=$(ticks "$coordinator"); w1=$(ticks "${workers[@]}"); t1=$(date +%s.%N)
elapsed=$(echo "$t1 - $t0" | bc)
printf "idle (heartbeats every $HEARTBEAT, one held job): coordinator %.2f%% of a core, all %d workers together %.2f%% (%.3f%% each); %s\n" \
    "$(echo "($c1 - $c0) * 100 / $hz / $elapsed" | bc -l)" "$WORKERS" \
    "$(echo "($w1 - $w0) * 100 / $hz / $elapsed" | bc -l)" "$(echo "($w1 - $w0) * 100 / $hz / $elapsed / $WORKERS" | bc -l)" "$(loadlabel)"

# Memory: each worker and its guard (a forked child named jobtop-guard): RSS counts the pages
# shared with the other workers (the binary, libraries) in full; PSS shares them out; private is
# what each adds on its own.
kb() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
w_rss=0; w_pss=0; w_private=0; g_rss=0; g_pss=0; g_private=0; guards=0
for pid in "${workers[@]}"; do
    w_rss=$((w_rss + $(kb "$pid" Rss))); w_pss=$((w_pss + $(kb "$pid" Pss)))
    w_private=$((w_private + $(kb "$pid" Private_Clean) + $(kb "$pid" Private_Dirty)))
    for child in $(cat "/proc/$pid/task/"*/children 2>/dev/null); do
        if [ "$(cat "/proc/$child/comm" 2>/dev/null)" = jobtop-guard ]; then
            g_rss=$((g_rss + $(kb "$child" Rss))); g_pss=$((g_pss + $(kb "$child" Pss)))
            g_private=$((g_private + $(kb "$child" Private_Clean) + $(kb "$child" Private_Dirty)))
            guards=$((guards + 1))
        fi
    done
done
mib() { echo "$1 / $2 / 1024" | bc -l; }
g=$((guards + (guards == 0)))
printf 'memory per worker: RSS %.1f MiB, PSS %.1f MiB, private %.1f MiB; its guard (%d found): RSS %.1f, PSS %.1f, private %.1f MiB; coordinator RSS %.1f MiB\n' \
    "$(mib $w_rss "$WORKERS")" "$(mib $w_pss "$WORKERS")" "$(mib $w_private "$WORKERS")" "$guards" \
    "$(mib $g_rss $g)" "$(mib $g_pss $g)" "$(mib $g_private $g)" "$(mib "$(kb "$coordinator" Rss)" 1)"

touch "$work/go"
wait "$coordinator" || true

# --- Phase 2: the jobs ---------------------------------------------------------------------
awk -v n="$JOBS" 'BEGIN { for (i = 0; i < n; i++) print "true" }' > "$work/jobs.txt"
# The workers knock again with backoff (100 ms doubling, up to 5 s) until this one listens.
/usr/bin/time -f "%U %S %e %M" -o "$work/time2" \
    "$JOBTOP" run "$work/jobs.txt" --listen "127.0.0.1:$PORT" --token-file "$work/token" -j 0 --headless \
    --log-format json > "$work/log2" 2> "$work/err2" &
coordinator=$!
pids+=("$coordinator")
wait "$coordinator" || { echo "phase 2 exited with $?:"; tail -5 "$work/err2"; }
read -r user sys wall maxkb < "$work/time2"
ends=$(grep -E '"event":"(succeeded|failed|cancelled)"' "$work/log2" | grep -o '"job":"[^"]*"' | sort | uniq -c)
distinct=$(echo "$ends" | grep -c . || true)
once=$(echo "$ends" | awk '$1 == 1' | grep -c . || true)
succeeded=$(grep -c '"event":"succeeded"' "$work/log2" || true)
rejoined=$(grep -c '"event":"worker-joined"' "$work/log2" || true)
used=$(grep '"event":"started"' "$work/log2" | grep -o '"worker":"[^"]*"' | sort -u | grep -c . || true)
printf 'run: %d true jobs on %d workers (%d rejoined, %d ran jobs): %d ended, %d exactly once, %d succeeded; wall %.2f s (%.0f jobs/s)\n' \
    "$JOBS" "$WORKERS" "$rejoined" "$used" "$distinct" "$once" "$succeeded" "$wall" "$(echo "$JOBS / $wall" | bc -l)"
printf 'coordinator CPU: %.2f s user + %.2f s system = %.0f us per job; peak RSS %.1f MiB; %s\n' \
    "$user" "$sys" "$(echo "($user + $sys) * 1000000 / $JOBS" | bc -l)" "$(echo "$maxkb / 1024" | bc -l)" "$(loadlabel)"
summary=$(tail -1 "$work/log2")
echo "summary: $summary"

for pid in "${workers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${workers[@]}"; do wait "$pid" 2>/dev/null || true; done
[ "$once" -eq "$JOBS" ] && [ "$succeeded" -eq "$JOBS" ] || { echo "NOT every job ended once and succeeded"; exit 1; }
