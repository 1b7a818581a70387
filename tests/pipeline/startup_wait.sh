#!/usr/bin/env bash
# Start-up honours --peer-timeout and says what it waits for (before, both
# waits were a fixed, silent 60 s):
#  - rank 1 alone (no rank 0 at MASTER_ADDR:MASTER_PORT) prints that it waits
#    for rank 0 and gives up after --peer-timeout 5 s, naming rank 0's address;
#  - rank 0 alone prints which ranks it waits for and gives up the same way.
# The two lone ranks wait at once, on two ports (the test's time is one wait).
#   startup_wait.sh PIPEZIP
set -uo pipefail
PZ="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$PZ" tokenize --out "$tmp/t.bin" "$0" "$0" "$0" "$0" >/dev/null || { echo "FAIL: tokenize"; exit 1; }
port0=$(python3 "$(dirname "$0")/free_port.py") && port1=$(python3 "$(dirname "$0")/free_port.py") ||
  { echo "FAIL: free_port.py"; exit 1; }
[ "$port1" != "$port0" ] || port1=$(python3 "$(dirname "$0")/free_port.py")
[ "$port1" != "$port0" ] || { echo "FAIL: free_port.py gave port $port0 three times"; exit 1; }
common=(train --stages 2 --preset tiny --data "$tmp/t.bin" --batch 2 --seq 16 --steps 1 --peer-timeout 5)
alone() {  # RANK PORT: that rank with no peer; its output, exit status and seconds in $tmp/RANK.*
  local start; start=$(date +%s.%N)
  RANK=$1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$2 timeout 30 "$PZ" "${common[@]}" >"$tmp/$1.out" 2>&1
  echo $? >"$tmp/$1.rc"
  python3 -c "print(round($(date +%s.%N) - $start, 1))" >"$tmp/$1.secs"
}
alone 1 "$port1" & alone 0 "$port0" & wait
for rank in 1 0; do
  out=$(cat "$tmp/$rank.out"); rc=$(cat "$tmp/$rank.rc"); secs=$(cat "$tmp/$rank.secs")
  echo "rank $rank alone: exit $rc after $secs s"; grep -E "waiting|error" <<<"$out"
  [ "$rc" = 1 ] || { echo "FAIL: rank $rank alone: exit $rc, want 1"; exit 1; }
  python3 -c "import sys; sys.exit(0 if 4.5 <= $secs <= 12 else 1)" || { echo "FAIL: gave up after $secs s, not --peer-timeout 5"; exit 1; }
  if [ "$rank" = 1 ]; then
    grep -q "rank 1: waiting for rank 0 at 127.0.0.1:$port1" <<<"$out" || { echo "FAIL: no waiting note"; exit 1; }
    grep -q "cannot reach rank 0 at 127.0.0.1:$port1" <<<"$out" || { echo "FAIL: no final message"; exit 1; }
  else
    grep -q "rank 0: waiting for rank 1 to join at 127.0.0.1:$port0" <<<"$out" || { echo "FAIL: no waiting note"; exit 1; }
    grep -q "only 1 of 2 ranks joined.*missing: 1" <<<"$out" || { echo "FAIL: no final message"; exit 1; }
  fi
done
echo ok
