#!/usr/bin/env bash
# Dashboard benchmark (release build, in a real terminal: a private tmux server).
#   1. Idle: an empty dashboard for IDLE seconds; CPU of the whole jobtop process.
#   2. Load: N jobs (`sleep 0.01`, J slots, about 1,000 scheduler events a second); CPU of the
#      main thread (the dashboard: ncurses, view model, key handling all run there) and of the
#      whole process, and the frames drawn (JOBTOP_FRAME_STATS).
# CPU comes from /proc/<pid>/stat and /proc/<pid>/task/<pid>/stat (utime + stime).
#
#   Scripts/bench-dashboard.sh                 # N=10000 J=8 IDLE=10
#   N=2000 IDLE=5 Scripts/bench-dashboard.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000}
J=${J:-8}
IDLE=${IDLE:-10}
SCRATCH=${SCRATCH:-.build-bench-dashboard}

command -v tmux > /dev/null || { echo "bench-dashboard: tmux is needed (apt-get install tmux)" >&2; exit 2; }
swift build -c release --product jobtop --scratch-path "$SCRATCH" > /dev/null
JOBTOP="$(pwd)/$SCRATCH/release/jobtop"

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
yes "sleep 0.01" | head -n "$N" > "$work/jobs.txt"
tmux_ send-keys -t 0 "clear" Enter
tmux_ send-keys -t 0 -l "JOBTOP_FRAME_STATS=$work/load.frames $JOBTOP -j $J jobs.txt"
tmux_ send-keys -t 0 Enter
wait_screen " jobtop " 30
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
events=$(( N * 3 ))
echo "load: $N jobs, -j $J, $(printf '%.1f' "$seconds")s, ~$(awk -v e="$events" -v s="$seconds" 'BEGIN { printf "%d", e / s }') events/s (submitted+started+succeeded)"
echo "      UI (main thread) CPU $(pct $(( after_main - before_main )))% of a core; whole process $(pct $(( after_all - before_all )))%"
echo "      $(cat "$work/load.frames")  (frames counted over the dashboard's whole life)"
echo "last screen:"
cat "$work/screen.txt"
