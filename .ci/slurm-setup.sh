#!/usr/bin/env bash
# Install and start a single-node SLURM on this machine (Debian/Ubuntu), idempotently.
#
#   sudo .ci/slurm-setup.sh          # exit 0: `sinfo` shows the node idle; the partition is "ci"
#
# For CI and tests/test_slurm.py only: one node (this host), proctrack/linuxproc, task/none,
# no accounting database (accounting_storage/none, so `sacct` has no data: the test profile
# polls with squeue; MinJobAge=300 keeps finished jobs visible to squeue long enough),
# munged running as the munge user, slurmctld and slurmd as root.
# A slurm.conf written by anyone else is never touched: the script then only checks that
# the daemons answer. Exit codes: 0 ready, 77 cannot run here (not root, no apt, no binaries),
# 1 a daemon did not come up (the daemon logs are printed).
set -euo pipefail

MARK="# written by geoanatomy .ci/slurm-setup.sh"
CONF=/etc/slurm/slurm.conf
PART=ci
LOGDIR=/var/log/slurm

say() { echo "slurm-setup: $*" >&2; }

ready() {  # the node answers and is usable (idle/mixed/allocated)
    timeout 10 sinfo -h -p "$PART" -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'
}

if command -v sinfo >/dev/null && ready; then say "already running (partition $PART)"; exit 0; fi
if [ "$(id -u)" != 0 ]; then
    say "needs root (installs packages, writes $CONF, starts daemons)"; exit 77
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    if ! command -v apt-get >/dev/null; then say "slurm-wlm/munge missing and no apt-get"; exit 77; fi
    say "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null \
        || { say "apt-get install slurm-wlm munge failed"; exit 77; }
fi

if ready; then say "already running (partition $PART)"; exit 0; fi

# ---- munge: key + daemon as the munge user
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
        || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
fi
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
    munge -n | unmunge >/dev/null || { say "munged does not answer"; exit 1; }
fi

# ---- slurm.conf (only ours is ever (re)written)
HOST=$(hostname -s)
NODE_LINE=$(slurmd -C | head -1)   # NodeName=<host> CPUs=... RealMemory=... (this machine's shape)
if [ ! -e "$CONF" ] || grep -qF "$MARK" "$CONF"; then
    install -d /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOGDIR"
    cat > "$CONF.tmp" <<EOF
$MARK
ClusterName=geoanatomy-ci
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=300
MpiDefault=none
$NODE_LINE State=UNKNOWN
PartitionName=$PART Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
else
    say "$CONF exists and is not ours: leaving it alone"
fi

# ---- daemons (each started only if not already running)
if ! pgrep -x slurmctld >/dev/null; then say "starting slurmctld"; slurmctld; fi
for _ in $(seq 30); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
if ! pgrep -x slurmd >/dev/null; then say "starting slurmd"; slurmd; fi
for _ in $(seq 40); do ready && break; sleep 0.5; done
if ! ready; then
    # a node left DOWN/DRAIN by an earlier run of the daemons: bring it back once
    scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true
    sleep 1
fi
if ready; then
    say "ready: $(sinfo -h -o '%P %D %t %c CPUs %m MB')"
    exit 0
fi
say "SLURM did not come up"; sinfo 2>&1 || true
tail -n 20 "$LOGDIR/slurmctld.log" "$LOGDIR/slurmd.log" 2>/dev/null || true
exit 1
