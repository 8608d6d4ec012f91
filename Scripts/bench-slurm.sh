#!/usr/bin/env bash
# jobtop on Slurm against a plain `sbatch --wait` loop of the same jobs, in the same run, and the
# calls jobtop makes to Slurm (counted by wrappers put first on PATH).
#
#   Scripts/bench-slurm.sh [JOBS] [PARALLEL]        # default 20 jobs, 2 at a time
#   Scripts/bench-slurm.sh --poll-load [JOBS] [SECONDS]   # default 1000 `sleep 600` jobs kept
#       submitted (-j JOBS) for 60 s after the last submission: Slurm calls per minute
#
# Needs a running Slurm (Scripts/start-slurm.sh) and a built jobtop (.build-release, .build/release or debug).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=compare
if [ "${1:-}" = "--poll-load" ]; then mode=poll; shift; fi
jobs="${1:-20}"
parallel="${2:-2}"
# A release build (swift build -c release --scratch-path .build-release --product jobtop), else
# .build's release or debug one; JOBTOP_BIN picks another.
bin="${JOBTOP_BIN:-}"
for candidate in .build-release/release/jobtop .build/release/jobtop .build/debug/jobtop; do
    [ -n "$bin" ] || { [ -x "$candidate" ] && bin="$candidate"; }
done
echo "jobtop: $bin"
work="$(mktemp -d /tmp/jobtop-bench-slurm.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# Wrappers that count every call, then run the real command.
mkdir -p "$work/bin"
for command in sbatch squeue scontrol scancel sinfo; do
    real="$(command -v "$command")"
    printf '#!/bin/sh\necho %s >> %s/calls\nexec %s "$@"\n' "$command" "$work" "$real" > "$work/bin/$command"
    chmod +x "$work/bin/$command"
done

now() { date +%s.%N; }

if [ "$mode" = poll ]; then
    jobs="${1:-1000}"
    seconds="${2:-60}"
    for command in sbatch squeue scontrol scancel sinfo; do
        real="$(command -v "$command")"
        printf '#!/bin/sh\necho "$(date +%%s.%%N) %s" >> %s/calls\nexec %s "$@"\n' "$command" "$work" "$real" > "$work/bin/$command"
    done
    : > "$work/jobs.toml"
    for _ in $(seq 1 "$jobs"); do printf '[[job]]\ncommand = "sleep 600"\n' >> "$work/jobs.toml"; done
    : > "$work/calls"
    echo "load: $(uptime | sed 's/.*load average: //')"
    PATH="$work/bin:$PATH" "$bin" run "$work/jobs.toml" --slurm -j "$jobs" --headless --slurm-dir "$work/slurm" > "$work/log" &
    pid=$!
    # Wait for the last submission, then count calls over the window.
    while [ "$(grep -c ' sbatch$' "$work/calls")" -lt "$((jobs + 1))" ]; do sleep 1; done
    from="$(now)"
    start_squeue="$(date +%s.%N)"
    t0=$(date +%s%N)
    squeue -h -o '%i|%T|%r' -j "$(squeue -h -o %i | paste -sd, -)" > /dev/null
    t1=$(date +%s%N)
    sleep "$seconds"
    to="$(now)"
    echo "load: $(uptime | sed 's/.*load average: //')"
    echo "Slurm calls per minute with $jobs jobs submitted (window ${seconds}s after the last sbatch):"
    awk -v from="$from" -v to="$to" '$1 >= from && $1 < to { n[$2]++ } END { for (c in n) printf "  %-8s %.1f/min\n", c, n[c] * 60 / (to - from) }' "$work/calls"
    echo "one squeue call for all $jobs jobs took $(( (t1 - t0) / 1000000 )) ms"
    kill -INT "$pid"
    wait "$pid" || true
    echo "after the cancel: $(squeue -h | wc -l) jobs left in Slurm; scancel calls: $(grep -c ' scancel$' "$work/calls")"
    exit 0
fi

# The same jobs both ways: `true`, PARALLEL at a time.
printf '[[job]]\ncommand = "true"\n' > "$work/one.toml"
: > "$work/jobs.toml"
for _ in $(seq 1 "$jobs"); do printf '[[job]]\ncommand = "true"\n' >> "$work/jobs.toml"; done

echo "load: $(uptime | sed 's/.*load average: //')"

start="$(now)"
seq 1 "$jobs" | xargs -P "$parallel" -I{} sbatch --wait --quiet --output /dev/null --wrap true
loop="$(echo "$(now) - $start" | bc)"

: > "$work/calls"
start="$(now)"
PATH="$work/bin:$PATH" "$bin" run "$work/jobs.toml" --slurm -j "$parallel" --headless --slurm-dir "$work/slurm" > "$work/log"
jobtop="$(echo "$(now) - $start" | bc)"

echo "load: $(uptime | sed 's/.*load average: //')"
printf 'sbatch --wait loop (-P %s): %.2f s for %s jobs (%.3f s/job)\n' "$parallel" "$loop" "$jobs" "$(echo "$loop / $jobs" | bc -l)"
printf 'jobtop --slurm -j %s:        %.2f s for %s jobs (%.3f s/job)\n' "$parallel" "$jobtop" "$jobs" "$(echo "$jobtop / $jobs" | bc -l)"
printf 'overhead per job: %.3f s\n' "$(echo "($jobtop - $loop) / $jobs" | bc -l)"
echo "calls jobtop made:"
sort "$work/calls" | uniq -c
printf 'squeue per minute: %.1f\n' "$(echo "$(grep -c '^squeue$' "$work/calls") * 60 / $jobtop" | bc -l)"
