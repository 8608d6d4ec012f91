#!/usr/bin/env bash
# Checks Scripts/start-slurm.sh's fresh-machine path without a new machine, as root: stops this
# machine's one-node Slurm, then in private mount and pid namespaces (host network, so the ports
# must be free) hides /run, /etc/munge, /etc/slurm, /var/spool, /var/log and /var/lib/munge behind
# empty tmpfs (no daemons, no munge key, no slurm.conf, no spool or log directories) and runs
# start-slurm.sh with no stdin: first start, a job, a second run (no-op), slurmd dead, slurmctld
# killed -9 (stale pid file), munged dead, stop-slurm.sh then start again. Then starts this
# machine's Slurm again. The packages must be installed (the apt-get path needs a new machine).
#
#   Scripts/check-start-slurm.sh
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

if [ "${1:-}" = "--inner" ]; then
    for dir in /run /etc/munge /etc/slurm /var/spool /var/log /var/lib/munge; do
        mount -t tmpfs -o mode=0755 tmpfs "$dir"
    done
    out="$(mktemp -d /tmp/jobtop-check-slurm.XXXXXX)"
    chmod 755 "$out"
    run() {
        local t0 t1
        t0=$(date +%s%N)
        "$repo/Scripts/start-slurm.sh" </dev/null
        local rc=$?
        t1=$(date +%s%N)
        echo "   -> exit $rc in $(( (t1 - t0) / 1000000 )) ms"
    }
    echo "== fresh: munge key [$(ls /etc/munge)] slurm.conf [$(ls /etc/slurm)] spool [$(ls /var/spool)]"
    echo "== first start"; run
    echo "== a job"
    id="$(timeout 20 sbatch --parsable --wrap 'echo hello from slurm' -o "$out/out.%j")"
    state=""
    for _ in $(seq 1 60); do
        [ -n "$id" ] || break
        state="$(timeout 5 scontrol -o show job "$id" | grep -o 'JobState=[A-Z]*')"
        [ "$state" = JobState=COMPLETED ] && break
        sleep 0.5
    done
    echo "   job '$id' $state: $(cat "$out/out.$id" 2>&1)"
    echo "== again, everything up"; run
    echo "== slurmd dead"; kill "$(cat /run/slurmd.pid)"; sleep 1; run
    echo "== slurmctld killed -9 (stale pid file)"; kill -9 "$(cat /run/slurmctld.pid)"; sleep 1; run
    echo "== munged dead"; kill "$(cat /run/munge/munged.pid)"; sleep 1; run
    echo "== stop-slurm.sh, then start"; "$repo/Scripts/stop-slurm.sh" </dev/null; run
    rm -rf "$out"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || { echo "check-start-slurm: run as root" >&2; exit 1; }
"$repo/Scripts/stop-slurm.sh"
# PID 1 of the namespace ignores SIGTERM: a hang is ended with SIGKILL, which ends every daemon in it.
timeout -s KILL 300 unshare --mount --pid --fork --mount-proc "$0" --inner
echo "== the namespace ended ($?); this machine's Slurm again"
"$repo/Scripts/start-slurm.sh" </dev/null
