#!/bin/bash
# One CPU + GPU cross run on a lent GPU machine (tool `device`), from the repo
# root, after the payload's parts were moved to /tmp/chunks (see setup.sh):
#   bash scripts/device/cross_run.sh NAME ROUNDS SECONDS [check]
# with carry [".gpu/setup.sh"]. Sets TF up (setup.sh), with `check` runs
# check_tf_gpu.py first, then `fidelity.py --cross --in_process --rounds
# ROUNDS` for at most SECONDS, keeping the record ($OUT/NAME.json.gz), the
# calibration ($OUT/cal_NAME/) and the log ($OUT/NAME.log), and prints the
# matrix and the benchmark's GPU figures. EXTRA adds fidelity.py flags
# (e.g. EXTRA=--noprobe_drift: ~136 s instead of ~170 s on the H200).
# SERVERS instead runs it on local TF server workers (e.g.
# SERVERS="--worker_gpus=0,none --cores_per_worker=4": worker 0 has the GPU).
NAME=$1; ROUNDS=$2; SECS=$3; shift 3
source .gpu/setup.sh > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
export TF_CPP_MIN_LOG_LEVEL=1
if [ "$1" = check ]; then
  timeout 150 python3 scripts/device/check_tf_gpu.py > "$OUT/check.txt" 2>&1
  echo "check rc $?"; tail -8 "$OUT/check.txt"
fi
T=$(date +%s)
timeout "$SECS" python3 scripts/fidelity.py --cross ${SERVERS:---in_process} \
    --rounds "$ROUNDS" --record "$OUT/$NAME.json.gz" \
    --calibration_out "$OUT/cal_$NAME" --json $EXTRA > "$OUT/$NAME.log" 2>&1
echo "cross rc $? in $(( $(date +%s) - T )) s"
grep -a "^| " "$OUT/$NAME.log" | tail -9
grep -a "launch \|GPU:0: matmul" "$OUT/$NAME.log" | head -10
