# lib.sh: the common start of the pipeline test scripts, sourced after `set -u`:
#   pz_test_init PIPEZIP   pz=PIPEZIP; dir=a fresh temp dir, removed at exit
#                          with any process still running from it; fails=0
#   pz_corpus [FLAGS...]   tokenizes runtime/*/*.c into $dir/train.bin (FLAGS:
#                          more `pipezip tokenize` flags); returns its status
#   fail MESSAGE...        prints "FAIL: MESSAGE" and counts it in fails

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
