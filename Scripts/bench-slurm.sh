#!/usr/bin/env bash
# jobtop on Slurm against a plain `sbatch --wait` loop of the same jobs, in the same run, and the
# calls jobtop makes to Slurm (counted by wrappers put first on PATH).
#
#   Scripts/bench-slurm.sh [JOBS] [PARALLEL]        # default 20 jobs, 2 at a time
#
# Needs a running Slurm (Scripts/start-slurm.sh) and a built jobtop (.build/release or debug).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-20}"
parallel="${2:-2}"
bin=.build/release/jobtop
[ -x "$bin" ] || bin=.build/debug/jobtop
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
