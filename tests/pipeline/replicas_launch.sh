#!/usr/bin/env bash
# Replicas under every launcher (issue 25: "works with the local launcher,
# mpirun, srun and env launch"): S=2 x D=2 started by hand as the launchers
# start it, 4 processes that find their rank in the launcher's variables
# (RANK/WORLD_SIZE; srun's SLURM_PROCID/SLURM_NTASKS with its local ids;
# mpirun's own, when Open MPI is installed), in both layouts. Each run must
# log the local launcher's losses bit for bit and save its model byte for
# byte, with the replicas compared after every step (PIPEZIP_DP_CHECK=step).
#   usage: replicas_launch.sh PATH/TO/pipezip
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
pz_corpus || exit 1
export PIPEZIP_DP_CHECK=step
common=(train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --steps 4 --threads 1 --micro-batches 2
        --stages 2 --replicas 2 --seed 7 --peer-timeout 30)
secret=replicas-launch-test-secret-0123456789

losses() { grep -o '"step":[0-9]*,"loss":[0-9.e+-]*' "$1"; }

# same LABEL LAYOUT: this run's losses and model against the local launcher's
same() {
    local label="$1" layout="$2"
    if [ "$(losses "$dir/run.out" | wc -l)" != 4 ] || ! diff <(losses "$dir/local-$layout.out") <(losses "$dir/run.out") >/dev/null; then
        tail -5 "$dir"/run*.err; fail "$label, $layout: not the local launcher's 4 losses"
    elif ! cmp -s "$dir/local-$layout.safetensors" "$dir/run.safetensors"; then
        fail "$label, $layout: the saved model differs from the local launcher's"
    else
        echo "ok: $label, $layout: the local launcher's losses and model, bit for bit"
    fi
    rm -f "$dir"/run*
}

# by_env LABEL LAYOUT [WANT]: 4 ranks, rank r with the VAR=value pairs `vars_for r` prints;
# WANT: words rank 0's stderr must hold
by_env() {
    local label="$1" layout="$2" want="${3:-}" port r pids=()
    port=$(python3 "$(dirname "$0")/free_port.py")
    for r in 0 1 2 3; do
        env $(vars_for "$r") MASTER_PORT="$port" PIPEZIP_JOB_SECRET=$secret timeout 120 \
            "$pz" "${common[@]}" --layout "$layout" --save "$dir/run.safetensors" > "$dir/run$r.out" 2>"$dir/run$r.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fail "$label, $layout: a rank failed"; done
    # each process is the rank its variables name (not a local launcher of its own,
    # which would train the whole job alone and log the same losses): rank r's
    # start-up line, and step lines from rank 0 only
    for r in 0 1 2 3; do
        [ "$(grep -m1 -o '^rank [0-9]*:' "$dir/run$r.err")" = "rank $r:" ] || fail "$label, $layout: process $r is not rank $r"
        [ "$r" = 0 ] || [ ! -s "$dir/run$r.out" ] || fail "$label, $layout: process $r logged steps"
    done
    [ -z "$want" ] || grep -q "$want" "$dir/run0.err" || fail "$label, $layout: no '$want' on rank 0"
    cp "$dir/run0.out" "$dir/run.out"
    same "$label" "$layout"
}

for layout in stage-major replica-major; do
    "$pz" "${common[@]}" --layout "$layout" --save "$dir/local-$layout.safetensors" > "$dir/local-$layout.out" \
        2>"$dir/local.err" || { tail -5 "$dir/local.err"; fail "local launcher, $layout"; continue; }
    vars_for() { echo "RANK=$1 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1"; }
    by_env "env (RANK, WORLD_SIZE)" "$layout"
    vars_for() { echo "SLURM_PROCID=$1 SLURM_NTASKS=4 SLURM_LOCALID=$1 SLURM_NTASKS_PER_NODE=4"; }
    by_env "srun (SLURM_PROCID, SLURM_NTASKS)" "$layout" "4 local ranks: srun"
    if ! command -v mpirun >/dev/null; then
        echo "skip: mpirun not installed (bash tools/setup.sh --tests installs openmpi-bin)"
        continue
    fi
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun --oversubscribe --bind-to none -np 4 \
        -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$(python3 "$(dirname "$0")/free_port.py")" -x PIPEZIP_JOB_SECRET=$secret \
        -x PIPEZIP_DP_CHECK "$pz" "${common[@]}" --layout "$layout" --save "$dir/run.safetensors" \
        > "$dir/run.out" 2>"$dir/run.err" || fail "mpirun, $layout: exit $?"
    grep -q "local ranks: mpirun" "$dir/run.err" || fail "mpirun, $layout: the ranks did not take mpirun's variables"
    same "mpirun -np 4" "$layout"
done
[ "$fails" = 0 ] && echo "replicas-launch: all passed" || { echo "replicas-launch: $fails failed"; exit 1; }
