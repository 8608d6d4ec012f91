#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine (node `localhost`, partition `debug`), for
# jobtop's Slurm tests and for trying `jobtop run --slurm` locally. Debian/Ubuntu, as root, no
# systemd needed: installs `slurmctld slurmd slurm-client munge` if missing, writes
# /etc/slurm/slurm.conf (only if there is none, or the one there is ours), starts munged,
# slurmctld and slurmd, and waits until `sinfo` shows the node idle. Idempotent: running it
# again with everything up does nothing but the check. Stop it with Scripts/stop-slurm.sh.
set -euo pipefail

log() { printf 'start-slurm: %s\n' "$*" >&2; }
die() { printf 'start-slurm: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "run as root (or with sudo available)"
    SUDO="sudo"
fi

missing=()
command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || missing+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || [ -x /usr/sbin/slurmd ] || missing+=(slurmd)
command -v sbatch >/dev/null 2>&1 || missing+=(slurm-client)
command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || missing+=(munge)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
PATH="$PATH:/usr/sbin:/sbin"

conf=/etc/slurm/slurm.conf
marker="# written by jobtop Scripts/start-slurm.sh"
cpus="$(nproc)"
if [ ! -e "$conf" ] || grep -qF "$marker" "$conf"; then
    $SUDO mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
    new="$(cat <<EOF
$marker
ClusterName=jobtop
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MinJobAge=300
KillWait=5
InactiveLimit=0
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)"
    if [ ! -e "$conf" ] || [ "$(cat "$conf")" != "$new" ]; then
        printf '%s\n' "$new" | $SUDO tee "$conf" >/dev/null
        # A changed config needs the daemons to read it again.
        $SUDO scontrol reconfigure >/dev/null 2>&1 || true
    fi
else
    log "$conf exists and was not written by this script: using it as it is"
fi

# munge: a key, and the daemon.
if [ ! -s /etc/munge/munge.key ]; then
    log "creating the munge key"
    $SUDO mkdir -p /etc/munge
    $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    $SUDO chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    $SUDO chmod 400 /etc/munge/munge.key
fi
if ! munge -n </dev/null >/dev/null 2>&1; then
    log "starting munged"
    $SUDO mkdir -p /run/munge /var/log/munge /var/lib/munge
    $SUDO chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
    if id munge >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
        su -s /bin/sh munge -c "/usr/sbin/munged" || /usr/sbin/munged --force
    else
        $SUDO /usr/sbin/munged --force
    fi
    for _ in $(seq 1 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n </dev/null >/dev/null 2>&1 || die "munged did not start (see /var/log/munge/munged.log)"
fi

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! running /run/slurmctld.pid; then
    log "starting slurmctld"
    $SUDO /usr/sbin/slurmctld -i
fi
if ! running /run/slurmd.pid; then
    log "starting slurmd"
    # -N: the node is `localhost` whatever this machine calls itself.
    $SUDO /usr/sbin/slurmd -N localhost
fi

# Wait (up to 60 s) for the node to be idle (or mixed/allocated: jobs already running are fine).
state=""
for _ in $(seq 1 300); do
    state="$(sinfo -h -n localhost -o '%T' 2>/dev/null | head -1 || true)"
    case "$state" in
        idle|mixed|allocated|completing) break ;;
        down*|drain*|*unknown*|"") ;;
    esac
    # A node down from an earlier run (not responding, unexpected reboot) is brought back.
    case "$state" in down*|drain*) $SUDO scontrol update NodeName=localhost State=RESUME >/dev/null 2>&1 || true ;; esac
    sleep 0.2
done
case "$state" in
    idle|mixed|allocated|completing) log "slurm is up: node localhost $state, partition debug" ;;
    *) die "the node did not become idle (state '${state:-none}'); see /var/log/slurm/slurmctld.log and slurmd.log" ;;
esac
