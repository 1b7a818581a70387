# bench_args.sh, sourced by the bench scripts: their positional arguments,
# each with its default. `bench_args pz=build/pipezip runs=3 -- "$@"` sets pz
# to $1, or to build/pipezip where $1 is missing or empty, then runs to $2 or
# 3, and so on (as pz=${1:-build/pipezip} would).
bench_args() {
  local -a specs=()
  local s
  while [ "$1" != -- ]; do specs+=("$1"); shift; done
  shift
  for s in "${specs[@]}"; do
    printf -v "${s%%=*}" '%s' "${1:-${s#*=}}"
    [ $# -eq 0 ] || shift
  done
}
