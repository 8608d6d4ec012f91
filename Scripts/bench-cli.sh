#!/usr/bin/env bash
# CLI benchmark: N `true` jobs, 2 at a time, four ways, in the same run:
#   jobtop (release build, headless, text log to a file)  vs  xargs -P2 -I{} sh -c '{}'  vs  GNU parallel -j2
#   vs the floor (Scripts/bench-floor.c: posix_spawn of `sh -c true` with a new session, wait, nothing else).
# Every tool runs each job through `sh -c`. Prints the best of R rounds for each, the ratios and the
# load average (measure on a quiet machine: load < 1).
#
#   Scripts/bench-cli.sh            # N=2000 R=3 (JOBTOP=path: that build instead of a static release one)
#   N=500 R=5 Scripts/bench-cli.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2000}
R=${R:-3}
SCRATCH=${SCRATCH:-.build-static}

if ! command -v parallel > /dev/null; then
    echo "GNU parallel is missing: installing the Debian package 'parallel'" >&2
    apt-get install -y parallel > /dev/null 2>&1 || { apt-get update > /dev/null && apt-get install -y parallel > /dev/null; }
fi

if [ -z "${JOBTOP:-}" ]; then
    # The build the README tells users to make (the Swift runtime linked in): a dynamic build
    # spends ~30 ms more loading its libraries at start.
    swift build -c release --static-swift-stdlib --product jobtop --scratch-path "$SCRATCH" > /dev/null
    JOBTOP="$SCRATCH/release/jobtop"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/floor" Scripts/bench-floor.c
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++) print "true" }' > "$work/jobs.txt"

now() { date +%s.%N; }
best() { sort -g | head -n 1; }

run_jobtop()   { "$JOBTOP" -j 2 --headless "$work/jobs.txt" > "$work/jobtop.log"; }
run_xargs()    { xargs -P2 -I{} sh -c '{}' < "$work/jobs.txt"; }
run_parallel() { parallel --will-cite -j2 < "$work/jobs.txt"; }
run_floor()    { "$work/floor" "$N" 2; }

declare -A times
for tool in floor jobtop xargs parallel; do
    : > "$work/$tool.times"
done
for round in $(seq 1 "$R"); do
    for tool in floor jobtop xargs parallel; do
        start=$(now)
        "run_$tool"
        end=$(now)
        awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }' >> "$work/$tool.times"
    done
done
for tool in floor jobtop xargs parallel; do
    times[$tool]=$(best < "$work/$tool.times")
done

lines=$(wc -l < "$work/jobtop.log")
summary=$(tail -n 1 "$work/jobtop.log")
awk -v n="$N" -v r="$R" -v cores="$(nproc)" -v j="${times[jobtop]}" -v x="${times[xargs]}" -v p="${times[parallel]}" \
    -v f="${times[floor]}" -v load0="$load_start" -v load1="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
    printf "%d jobs of `true`, 2 at a time, best of %d rounds (%d cores; load average before: %s, after: %s)\n", n, r, cores, load0, load1
    printf "  %-9s %8.3f s  %7.0f jobs/s  %5.2f ms/job\n", "floor", f, n / f, 1000 * f / n
    printf "  %-9s %8.3f s  %7.0f jobs/s  %5.2f ms/job\n", "jobtop", j, n / j, 1000 * j / n
    printf "  %-9s %8.3f s  %7.0f jobs/s  %5.2f ms/job\n", "xargs", x, n / x, 1000 * x / n
    printf "  %-9s %8.3f s  %7.0f jobs/s  %5.2f ms/job\n", "parallel", p, n / p, 1000 * p / n
    printf "  jobtop / floor    = %.2fx   (goal <= 1.25x)\n", j / f
    printf "  jobtop / xargs    = %.2fx   (goal <= 1.2x)\n", j / x
    printf "  parallel / jobtop = %.2fx   (goal >= 4x)\n", p / j
}'
printf '  jobtop log: %s lines; last: %s\n' "$lines" "$summary"
