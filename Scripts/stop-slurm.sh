#!/usr/bin/env bash
# Stops the one-node Slurm that Scripts/start-slurm.sh started (slurmd, slurmctld, munged), by
# the pids in their pid files. Leaves packages and configuration in place.
set -uo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
stop() {
    local pidfile="$1" name="$2"
    [ -f "$pidfile" ] || return 0
    local pid
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        printf 'stop-slurm: stopping %s (%s)\n' "$name" "$pid" >&2
        $SUDO kill "$pid"
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
}
stop /run/slurmd.pid slurmd
stop /run/slurmctld.pid slurmctld
stop /run/munge/munged.pid munged
