# lib.sh: the common start of the pipeline test scripts, sourced after `set -u`:
#   pz_test_init PIPEZIP   pz=PIPEZIP; dir=a fresh temp dir, removed at exit
#                          with any process still running from it; fails=0
#   pz_corpus [FLAGS...]   tokenizes runtime/*/*.c into $dir/train.bin (FLAGS:
#                          more `pipezip tokenize` flags); returns its status
#   fail MESSAGE...        prints "FAIL: MESSAGE" and counts it in fails
#   pz_sigterm LABEL CKDIR OUT ERR TENTHS CMD...
#                          runs CMD (stdout OUT, stderr ERR), sends it SIGTERM
#                          once OUT has step 2 (or after TENTHS tenths of a
#                          second) and checks a preemption: exit 143, a
#                          complete checkpoint in CKDIR, "stopping after step"
#                          on ERR; prints ok or fails; returns 0 when ok

pz_test_init() {
  pz="$1"
  dir=$(mktemp -d)
  trap 'pkill -KILL -f "$dir/" 2>/dev/null; rm -rf "$dir"' EXIT
  fails=0
}

pz_corpus() {
  cat "$(dirname "${BASH_SOURCE[0]}")"/../runtime/*/*.c > "$dir/text.txt"
  "$pz" tokenize --out "$dir/train.bin" "$@" "$dir/text.txt" >/dev/null
}

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

pz_sigterm() {
  local label=$1 ck=$2 out=$3 err=$4 tenths=$5 pid rc newest
  shift 5
  "$@" > "$out" 2>"$err" &
  pid=$!
  for _ in $(seq 1 "$tenths"); do grep -q '"step":2,' "$out" 2>/dev/null && break; sleep 0.1; done
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  newest=$(ls -d "$ck"/step-* 2>/dev/null | tail -n 1)
  if [ "$rc" = 143 ] && [ -n "$newest" ] && [ -f "$newest/manifest.json" ] && grep -q "stopping after step" "$err"; then
    echo "ok: $label: exit 143, $(grep -m1 -o 'stopping after step [0-9]*' "$err"), checkpoint $(basename "$newest")"
    return 0
  fi
  cat "$err"
  fail "$label: exit $rc, newest checkpoint '$newest'"
  return 1
}
