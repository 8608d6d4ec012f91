#!/usr/bin/env bash
# Dashboard benchmark (release build).
#   events: the view model's cost per scheduler event for a table of SMALL and of BIG queued
#      jobs (no terminal; jobtop-dashboard-bench): a cost that grows with the table shows as a
#      ratio far above 1. Frames (a full reorder of the table) are timed beside it.
#   screen, in a real terminal (a private tmux server):
#   1. Idle: an empty dashboard for IDLE seconds; CPU of the whole jobtop process.
#   2. Load: N jobs (`sleep 0.01`, J slots, about 1,000 scheduler events a second); CPU of the
#      main thread (the dashboard: ncurses, view model, key handling all run there) and of the
#      whole process, and the frames drawn (JOBTOP_FRAME_STATS).
# CPU comes from /proc/<pid>/stat and /proc/<pid>/task/<pid>/stat (utime + stime). The load
# average is printed beside the figures: on a busy machine they are slower, ratios less so.
#
#   Scripts/bench-dashboard.sh                 # both; N=10000 J=8 IDLE=10 SMALL=1000 BIG=100000 CYCLES=20000
#   Scripts/bench-dashboard.sh events          # only the per-event cost, key to frame with BIG jobs, model memory
#   Scripts/bench-dashboard.sh capture         # a capture of the header and the timeline (for the README)
#   N=2000 IDLE=5 Scripts/bench-dashboard.sh screen
#   JOBTOP=path/to/jobtop Scripts/bench-dashboard.sh screen   # an existing binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-all}
N=${N:-10000}
J=${J:-8}
IDLE=${IDLE:-10}
SMALL=${SMALL:-1000}
BIG=${BIG:-100000}
CYCLES=${CYCLES:-20000}
WORKERS=${WORKERS:-8}

case "$MODE" in
    all|events|screen|capture) ;;
    *) echo "bench-dashboard: unknown mode '$MODE' (all, events, screen or capture)" >&2; exit 2 ;;
esac

if [ "$MODE" = all ] || [ "$MODE" = events ]; then
    # The project's own .build (a scratch path of its own would be another full release build).
    swift build -c release --product jobtop-dashboard-bench > /dev/null
    "$(swift build -c release --show-bin-path)/jobtop-dashboard-bench" "$SMALL" "$BIG" "$CYCLES" "$WORKERS"
    [ "$MODE" = events ] && exit 0
fi

command -v tmux > /dev/null || { echo "bench-dashboard: tmux is needed (apt-get install tmux)" >&2; exit 2; }
if [ -z "${JOBTOP:-}" ]; then
    swift build -c release --product jobtop > /dev/null
    JOBTOP="$(swift build -c release --show-bin-path)/jobtop"
fi
echo "screen: load average $(cut -d' ' -f1-3 /proc/loadavg)"

work=$(mktemp -d)
socket="jobtop-bench-$$"
tmux_() { tmux -u -L "$socket" "$@"; }
cleanup() {
    tmux_ kill-server 2> /dev/null || true
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$socket"
    rm -rf "$work"
}
trap cleanup EXIT
export LANG=C.UTF-8 LC_ALL=C.UTF-8

ticks=$(getconf CLK_TCK)
# utime + stime (fields 14 and 15; the command name in field 2 may hold spaces).
cpu() { sed 's/.*) //' "$1" | awk '{print $12 + $13}'; }
now() { date +%s.%N; }
wait_screen() { # pattern, timeout seconds
    local deadline=$(( $(date +%s) + $2 ))
    until tmux_ capture-pane -p -t 0 | grep -q -- "$1"; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "bench-dashboard: timed out waiting for '$1'; the screen:" >&2
            tmux_ capture-pane -p -t 0 >&2
            exit 1
        fi
        sleep 0.1
    done
}
jobtop_pid() { pgrep -P "$(tmux_ display-message -p -t 0 '#{pane_pid}')" -x jobtop | head -n 1; }

tmux_ -f /dev/null new-session -d -x 100 -y 30 "cd $work && exec env PS1='READY$ ' /bin/sh"
tmux_ set-option -g window-size manual

if [ "$MODE" = capture ]; then
    # 300 sleeps of 0.2-1.2 s on 4 slots, one in ten failing: the header and the timeline after a while.
    awk 'BEGIN { srand(7); for (i = 1; i <= 300; i++) { d = 0.2 + rand(); printf "sleep %.1f%s\n", d, (i % 10 == 0 ? "; exit 1" : "") } }' > "$work/jobs.txt"
    tmux_ send-keys -t 0 -l "$JOBTOP -j 4 jobs.txt"
    tmux_ send-keys -t 0 Enter
    wait_screen " running · " 30
    sleep "${CAPTURE_AFTER:-40}"
    echo "header and table (top):"
    tmux_ capture-pane -p -t 0 | head -n 8
    tmux_ send-keys -t 0 t
    sleep 1
    echo "timeline (t):"
    tmux_ capture-pane -p -t 0 | head -n 8
    tmux_ send-keys -t 0 q
    tmux_ send-keys -t 0 q
    sleep 0.5
    tmux_ send-keys -t 0 y
    wait_screen "READY" 60
    exit 0
fi

# 1. Idle.
tmux_ send-keys -t 0 -l "JOBTOP_FRAME_STATS=$work/idle.frames $JOBTOP -j 2"
tmux_ send-keys -t 0 Enter
wait_screen "No jobs yet" 30
pid=$(jobtop_pid)
sleep 1
before=$(cpu "/proc/$pid/stat")
start=$(now)
sleep "$IDLE"
after=$(cpu "/proc/$pid/stat")
end=$(now)
tmux_ send-keys -t 0 q
wait_screen "READY" 30
idle_cpu=$(awk -v t="$(( after - before ))" -v hz="$ticks" -v s="$(echo "$end - $start" | bc)" 'BEGIN { printf "%.2f", 100 * t / hz / s }')
echo "idle: ${idle_cpu}% of a core over ${IDLE}s (pid $pid); $(cat "$work/idle.frames")"

# 2. Load.
seq "$N" | sed "s/.*/sleep 0.01/" > "$work/jobs.txt"
tmux_ send-keys -t 0 "clear" Enter
tmux_ send-keys -t 0 -l "JOBTOP_FRAME_STATS=$work/load.frames $JOBTOP -j $J jobs.txt"
tmux_ send-keys -t 0 Enter
wait_screen " running · " 30
pid=$(jobtop_pid)
before_main=$(cpu "/proc/$pid/task/$pid/stat")
before_all=$(cpu "/proc/$pid/stat")
start=$(now)
wait_screen "$N done" 600
after_main=$(cpu "/proc/$pid/task/$pid/stat")
after_all=$(cpu "/proc/$pid/stat")
end=$(now)
tmux_ capture-pane -p -t 0 > "$work/screen.txt"
tmux_ send-keys -t 0 q
wait_screen "READY" 30
seconds=$(echo "$end - $start" | bc)
pct() { awk -v t="$1" -v hz="$ticks" -v s="$seconds" 'BEGIN { printf "%.1f", 100 * t / hz / s }'; }
stat() { tr ' ' '\n' < "$work/load.frames" | sed -n "s/^$1=//p"; }
events=$(( N * 3 ))
echo "load: $N jobs, -j $J, $(printf '%.1f' "$seconds")s, ~$(awk -v e="$events" -v s="$seconds" 'BEGIN { printf "%d", e / s }') events/s (submitted+started+succeeded)"
echo "      frames: $(stat frames) in $(stat seconds)s of dashboard, at most $(stat max_per_second) in any second ($(cat "$work/load.frames"))"
echo "      UI CPU (the dashboard's own work: events, frames, keys; measured per thread inside it):" \
     "$(awk -v b="$(stat ui_cpu_seconds)" -v s="$seconds" 'BEGIN { printf "%.1f", 100 * b / s }')% of a core"
echo "      whole process (scheduler, spawning, reaping, UI): $(pct $(( after_all - before_all )))% of a core;" \
     "main thread $(pct $(( after_main - before_main )))%"
# The same jobs without the dashboard, for comparison.
/usr/bin/time -o "$work/headless.time" -f "%U %S %e" "$JOBTOP" -j "$J" --headless "$work/jobs.txt" > /dev/null 2>&1
headless=$(tail -n 1 "$work/headless.time")
echo "      headless, same jobs: $(echo "$headless" | awk '{ printf "%.1fs wall", $3 }') (for comparison)"
echo "last screen:"
cat "$work/screen.txt"
