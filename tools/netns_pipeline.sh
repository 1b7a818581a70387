#!/usr/bin/env bash
# Runs a pipezip pipeline with every stage in its own network namespace, the
# stages chained by veth pairs whose both ends are rate-limited with tc tbf:
# real kernel networking over a slow link (issue 5).
#
#   usage: tools/netns_pipeline.sh --stages S --mbps R [--delay-ms D] [--replicas D [--dp-mbps R2]]
#                                  [--pipezip PATH] [--keep] [--] TRAIN_ARGS...
#          tools/netns_pipeline.sh --check
#
# Topology (namespaces pz<PID>_0 .. pz<PID>_<S-1>, names unique per run):
#
#   pz_0 [pzr]--10.X.0.0/24--[pzl] pz_1 [pzr]--10.X.1.0/24--[pzl] pz_2 ...
#
# Link i joins stage i (10.X.i.1, device pzr) and stage i+1 (10.X.i.2, device
# pzl). Both ends get `tbf rate Rmbit`, so each direction carries R Mbit/s.
# --delay-ms D adds D ms of one-way propagation delay to each direction
# (what pipezip's --link-latency-ms simulates): both ends then get
# `netem delay Dms rate Rmbit` instead of tbf. netem is a kernel module
# (sch_netem) that some kernels lack; without it the script stops with a
# message before starting anything, and only the rate is shaped for real
# (the delay stays the simulated one).
# With S > 2 the inner namespaces forward IPv4 and every namespace has routes
# to every link, so all pairs of ranks connect (the transport opens an
# endpoint to every peer; rank 0 is the bootstrap master) and traffic between
# non-neighbours crosses every shaped link in between, as on a real chain.
#
# Each rank runs as
#   ip netns exec pz<PID>_i env RANK=i WORLD_SIZE=S LOCAL_RANK=i LOCAL_WORLD_SIZE=S MASTER_ADDR=10.X.0.1
#       MASTER_PORT=29500 UCX_TLS=tcp PIPEZIP train --stages S TRAIN_ARGS...
# UCX_TLS=tcp is forced: otherwise UCX sees one host and silently moves the
# data through shared memory, bypassing the link. For the same reason each
# rank also gets its own mount namespace with a private /dev/shm, so the
# data-parallel all-reduce finds no segment its peers can map. Rank 0's stdout (the JSON
# lines) is passed through unchanged; every rank's stderr is prefixed with
# "[rank i] ". If a rank fails, the script names it, stops the others and exits
# non-zero. The namespaces (and with them the veth pairs) are always deleted on
# exit, also after a failure or Ctrl-C; --keep leaves them for inspection.
#
# --replicas D (D > 1): D data-parallel replicas of the S-stage pipeline,
# S x D ranks (pipezip train --replicas D; its --layout is read from
# TRAIN_ARGS). Then every rank's namespace has one veth (eth0,
# 10.X.0.<rank+1>) into a switch namespace (pz<PID>_<S x D>) whose bridge
# joins them all, and each rank's eth0 shapes what it sends with tc htb: one
# class per peer, so each direction between two ranks is a link of its own
# (as pipezip's simulated links are): R Mbit/s to the ranks of its own
# replica (the pipeline's links), R2 (--dp-mbps, default R) to the other
# replicas of its stage (the data-parallel links), R to the rest (they only
# carry the transport's start-up and the step's small reductions). The
# switch side is not shaped. --delay-ms is not supported with replicas yet.
#
# --pipezip PATH: the binary (default: build/pipezip of this checkout, else
# pipezip on PATH). --trace FILE leaves one fragment per rank (FILE.rankN),
# unmerged. A SIGKILLed script cannot clean up: `ip netns del pz<PID>_i`.
#
# --check: only reports whether namespaces, veth pairs and tbf can be created
# here; exit 0 if so, 77 (the "skip" status of test harnesses) if not.
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2 (ip, tc).
# Environment: PZ_NETNS_PORT (default 29500), PZ_NETNS_BURST (tbf burst, e.g.
# 64kb; default max(32 KiB, 4 ms of the rate)).
set -uo pipefail

prog=$(basename "$0")
die() { echo "$prog: error: $*" >&2; exit 2; }
usage() {
    echo "usage: $prog --stages S --mbps R [--pipezip PATH] [--keep] [--] TRAIN_ARGS..."
    echo "       $prog --check        (exit 0: namespaces usable here; 77: not permitted)"
    echo "run '$prog --help' for details"
}

stages="" mbps="" delay="" keep=0 check=0 pz="" replicas=1 dp_mbps=""
while [ $# -gt 0 ]; do
    case "$1" in
        --stages) [ $# -ge 2 ] || die "--stages needs a value"; stages="$2"; shift 2 ;;
        --stages=*) stages="${1#*=}"; shift ;;
        --mbps) [ $# -ge 2 ] || die "--mbps needs a value"; mbps="$2"; shift 2 ;;
        --mbps=*) mbps="${1#*=}"; shift ;;
        --delay-ms) [ $# -ge 2 ] || die "--delay-ms needs a value"; delay="$2"; shift 2 ;;
        --delay-ms=*) delay="${1#*=}"; shift ;;
        --replicas) [ $# -ge 2 ] || die "--replicas needs a value"; replicas="$2"; shift 2 ;;
        --replicas=*) replicas="${1#*=}"; shift ;;
        --dp-mbps) [ $# -ge 2 ] || die "--dp-mbps needs a value"; dp_mbps="$2"; shift 2 ;;
        --dp-mbps=*) dp_mbps="${1#*=}"; shift ;;
        --pipezip) [ $# -ge 2 ] || die "--pipezip needs a value"; pz="$2"; shift 2 ;;
        --pipezip=*) pz="${1#*=}"; shift ;;
        --keep) keep=1; shift ;;
        --check) check=1; shift ;;
        -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
        --) shift; break ;;
        -*) # the first flag we do not know starts pipezip's own arguments
            break ;;
        *) die "unexpected argument '$1' (pipezip's arguments go after --)" ;;
    esac
done
train_args=("$@")

tag="pz$$"
ns_name() { echo "${tag}_$1"; }
created=()      # namespaces this run created
pids=()         # rank processes this run started

# 10.X.i.0/24: X from the PID, only cosmetic (each namespace has its own stack)
subnet_x=$(( 16 + $$ % 200 ))
addr() {  # addr LINK END(1=left stage, 2=right stage)
    echo "10.$subnet_x.$1.$2"
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    if [ ${#pids[@]} -gt 0 ]; then
        # give them 3 s, then SIGKILL: a namespace only disappears with its last process
        local t
        for t in $(seq 30); do
            local alive=0
            for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
            [ $alive = 0 ] && break
            sleep 0.1
        done
        for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
        wait 2>/dev/null
    fi
    if [ "$keep" = 1 ] && [ ${#created[@]} -gt 0 ]; then
        echo "$prog: --keep: namespaces left in place: ${created[*]} (delete with: ip netns del NAME)" >&2
    else
        local n
        for n in "${created[@]}"; do ip netns del "$n" 2>/dev/null; done
    fi
    exit "$rc"
}
on_signal() { echo "$prog: interrupted; stopping all ranks" >&2; exit 130; }
trap cleanup EXIT
trap on_signal INT TERM

need_tools() {
    local t
    for t in ip tc; do
        command -v "$t" >/dev/null 2>&1 || { echo "$prog: '$t' (iproute2) not found"; return 1; }
    done
}

# Probe: two namespaces, a veth pair between them, tbf on one end.
if [ "$check" = 1 ]; then
    [ ${#train_args[@]} -eq 0 ] && [ -z "$stages$mbps" ] || die "--check takes no other arguments"
    if ! msg=$(need_tools); then echo "$msg; cannot build namespaces here" >&2; exit 77; fi
    a=$(ns_name c0) b=$(ns_name c1)
    if ! err=$(ip netns add "$a" 2>&1); then
        echo "$prog: network namespaces not permitted here: ip netns add: $err" >&2; exit 77
    fi
    created+=("$a")
    ip netns add "$b" 2>/dev/null && created+=("$b")
    if ! err=$(ip -n "$a" link add pzr type veth peer name pzl netns "$b" 2>&1); then
        echo "$prog: cannot create a veth pair between namespaces: $err" >&2; exit 77
    fi
    if ! err=$(tc -n "$a" qdisc add dev pzr root tbf rate 100mbit burst 32kb latency 400ms 2>&1); then
        echo "$prog: cannot shape with tc tbf: $err" >&2; exit 77
    fi
    if ! err=$(ip netns exec "$a" true 2>&1); then
        echo "$prog: cannot run a program in a namespace (ip netns exec): $err" >&2; exit 77
    fi
    if ! err=$(ip netns exec "$a" unshare -m --propagation private \
            sh -c 'mount -t tmpfs -o mode=1777 pzshm /dev/shm' 2>&1); then
        echo "$prog: cannot give a namespace its own /dev/shm (unshare -m, mount tmpfs): $err" >&2; exit 77
    fi
    if err=$(tc -n "$b" qdisc add dev pzl root netem delay 10ms rate 100mbit 2>&1); then
        echo "$prog: network namespaces, veth pairs, tc tbf and tc netem (--delay-ms) are available"
    else
        echo "$prog: network namespaces, veth pairs and tc tbf are available; tc netem is not," \
             "so --delay-ms cannot be used here ($err)"
    fi
    exit 0
fi

# ---- arguments
[ -n "$stages" ] || { usage >&2; die "--stages S is required"; }
[ -n "$mbps" ] || { usage >&2; die "--mbps R is required"; }
[[ "$stages" =~ ^[0-9]+$ ]] && [ "$stages" -ge 1 ] && [ "$stages" -le 64 ] \
    || die "--stages must be an integer from 2 to 64 (1 with --replicas), got '$stages'"
[[ "$mbps" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--mbps must be a positive number (Mbit/s), got '$mbps'"
awk -v r="$mbps" 'BEGIN { exit !(r >= 0.1 && r <= 100000) }' \
    || die "--mbps must be between 0.1 and 100000 Mbit/s, got '$mbps'"
if [ -n "$delay" ]; then
    [[ "$delay" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--delay-ms must be a number of milliseconds, got '$delay'"
    awk -v d="$delay" 'BEGIN { exit !(d > 0 && d <= 60000) }' || die "--delay-ms must be in (0, 60000], got '$delay'"
fi
[[ "$replicas" =~ ^[0-9]+$ ]] && [ "$replicas" -ge 1 ] && [ $((stages * replicas)) -le 64 ] \
    || die "--replicas must be an integer from 1 with --stages x --replicas at most 64, got '$replicas'"
if [ -n "$dp_mbps" ]; then
    [ "$replicas" -gt 1 ] || die "--dp-mbps needs --replicas 2 or more"
    [[ "$dp_mbps" =~ ^[0-9]+([.][0-9]+)?$ ]] && awk -v r="$dp_mbps" 'BEGIN { exit !(r >= 0.1 && r <= 100000) }' \
        || die "--dp-mbps must be between 0.1 and 100000 Mbit/s, got '$dp_mbps'"
fi
[ "$stages" -ge 2 ] || [ "$replicas" -gt 1 ] || die "--stages must be an integer from 2 to 64 (1 with --replicas), got '$stages'"
[ -z "$delay" ] || [ "$replicas" = 1 ] || die "--delay-ms is not supported with --replicas yet"
[ ${#train_args[@]} -gt 0 ] || die "no pipezip train arguments given (put them after --)"
layout=stage-major
for ((k = 0; k < ${#train_args[@]}; k++)); do
    a=${train_args[$k]}
    case "$a" in
        --replicas|--replicas=*) die "give --replicas to $prog, not in pipezip's arguments" ;;
        --layout) layout=${train_args[$((k + 1))]:-} ;;
        --layout=*) layout=${a#*=} ;;
    esac
done
for a in "${train_args[@]}"; do
    case "$a" in
        --stages|--stages=*) die "give --stages to $prog, not in pipezip's arguments" ;;
        --trace|--trace=*) echo "$prog: note: --trace leaves one fragment per rank (FILE.rankN); they are not merged here" >&2 ;;
    esac
done
[ "${train_args[0]}" = train ] && train_args=("${train_args[@]:1}")   # tolerate a leading 'train'

if [ -z "$pz" ]; then
    here=$(cd "$(dirname "$0")/.." && pwd)
    for c in "$here/build/pipezip" "$(command -v pipezip 2>/dev/null)"; do
        [ -n "$c" ] && [ -x "$c" ] && { pz="$c"; break; }
    done
    [ -n "$pz" ] || die "cannot find the pipezip binary (build/pipezip); pass --pipezip PATH"
fi
[ -x "$pz" ] || die "--pipezip '$pz' is not an executable"
pz=$(cd "$(dirname "$pz")" && pwd)/$(basename "$pz")
if ! msg=$(need_tools); then echo "$msg" >&2; exit 77; fi
[ "$(id -u)" = 0 ] || echo "$prog: warning: not root; creating namespaces will probably fail" >&2

port=${PZ_NETNS_PORT:-29500}
# tbf burst must hold at least one timer tick of the rate (rate/HZ, HZ <= 1000..100):
# take 4 ms of the rate, at least 32 KiB
burst=${PZ_NETNS_BURST:-$(awk -v r="$mbps" 'BEGIN { b = r * 1e6 / 8 * 0.004; if (b < 32768) b = 32768; printf "%db", b }')}

# ---- namespaces and links
run_ip() {  # run_ip WHAT CMD...: run, on failure report and fail
    local what="$1"; shift
    local err
    if ! err=$("$@" 2>&1); then
        echo "$prog: cannot $what: $* : $err" >&2
        return 1
    fi
}
# rank w's stage and replica in pipezip's layout (runtime/dp/group.h)
stage_of() { if [ "$layout" = replica-major ]; then echo $(($1 % S)); else echo $(($1 / replicas)); fi; }
replica_of() { if [ "$layout" = replica-major ]; then echo $(($1 / S)); else echo $(($1 % replicas)); fi; }

add_ns() {  # add_ns NAME: a namespace of this run, with lo up (exit 77 where not permitted)
    local err
    if ! err=$(ip netns add "$1" 2>&1); then
        echo "$prog: network namespaces not permitted here: ip netns add $1: $err" >&2
        exit 77
    fi
    created+=("$1")
    run_ip "bring up lo" ip -n "$1" link set lo up || exit 1
}

wait_up() {  # wait_up NS DEV: until the kernel reports the veth's carrier (UCX ignores devices not running yet)
    local t st
    for ((t = 0; ; t++)); do
        st=$(ip -n "$1" -o link show dev "$2" 2>/dev/null)
        case "$st" in *"state UP"*) return 0 ;; esac
        [ "$t" -lt 100 ] || { echo "$prog: $2 in $1 did not come up within 10 s: $st" >&2; exit 1; }
        sleep 0.1
    done
}

# Replicas: every rank on a bridge; each rank's eth0 shapes its sends per
# peer (htb: a class and a filter on the peer's address for each), so each
# direction between two ranks is a link of its own; the default class (ARP)
# is not shaped.
build_star() {
    local sw w p n rate
    sw=$(ns_name "$W")
    add_ns "$sw"
    run_ip "create the bridge" ip -n "$sw" link add br0 type bridge || exit 1
    run_ip "bring up the bridge" ip -n "$sw" link set br0 up || exit 1
    for ((w = 0; w < W; w++)); do
        n=$(ns_name "$w")
        add_ns "$n"
        run_ip "create rank $w's veth" ip -n "$n" link add eth0 type veth peer name "r$w" netns "$sw" || exit 1
        run_ip "attach rank $w to the bridge" ip -n "$sw" link set "r$w" master br0 up || exit 1
        run_ip "address rank $w" ip -n "$n" addr add "10.$subnet_x.0.$((w + 1))/24" dev eth0 || exit 1
        run_ip "bring up rank $w's veth" ip -n "$n" link set eth0 up || exit 1
        run_ip "shape rank $w" tc -n "$n" qdisc add dev eth0 root handle 1: htb default 1 || exit 1
        run_ip "shape rank $w" tc -n "$n" class add dev eth0 parent 1: classid 1:1 htb rate 10gbit || exit 1
        for ((p = 0; p < W; p++)); do
            [ "$p" = "$w" ] && continue
            rate=$mbps
            if [ "$(stage_of "$p")" = "$(stage_of "$w")" ]; then rate=${dp_mbps:-$mbps}; fi
            # class ids are hex: the decimal p + 2 is still one per peer
            run_ip "shape rank $w to rank $p" tc -n "$n" class add dev eth0 parent 1: classid "1:$((p + 2))" \
                htb rate "${rate}mbit" ceil "${rate}mbit" || exit 1
            run_ip "shape rank $w to rank $p" tc -n "$n" filter add dev eth0 parent 1: protocol ip prio 1 u32 \
                match ip dst "10.$subnet_x.0.$((p + 1))/32" flowid "1:$((p + 2))" || exit 1
        done
    done
    for ((w = 0; w < W; w++)); do wait_up "$(ns_name "$w")" eth0; done
    master=10.$subnet_x.0.1
    echo "$prog: $W namespaces ${tag}_0..$((W - 1)) ($S stages x $replicas replicas, $layout) on a bridge in ${tag}_$W;" \
         "htb per peer: ${mbps} Mbit/s in a replica, ${dp_mbps:-$mbps} Mbit/s between replicas; master $master:$port; UCX_TLS=tcp" >&2
}

# No replicas: the chain of veth pairs, tbf (or netem) on both ends of each.
build_chain() {
    for ((i = 0; i < S; i++)); do add_ns "$(ns_name "$i")"; done
    for ((i = 0; i < S - 1; i++)); do
        l=$(ns_name "$i") r=$(ns_name $((i + 1)))
        run_ip "create the veth pair of link $i" ip -n "$l" link add pzr type veth peer name pzl netns "$r" || exit 1
        run_ip "address link $i" ip -n "$l" addr add "$(addr "$i" 1)/24" dev pzr || exit 1
        run_ip "address link $i" ip -n "$r" addr add "$(addr "$i" 2)/24" dev pzl || exit 1
        run_ip "bring up link $i" ip -n "$l" link set pzr up || exit 1
        run_ip "bring up link $i" ip -n "$r" link set pzl up || exit 1
        for end in "$l pzr" "$r pzl"; do
            read -r ns dev <<<"$end"
            if [ -n "$delay" ]; then
                # netem queues what the delay holds back: a limit of packets large
                # enough for a second of the rate at 1500-byte frames
                lim=$(awk -v r="$mbps" 'BEGIN { l = r * 1e6 / 8 / 1500; if (l < 1000) l = 1000; printf "%d", l }')
                if ! err=$(tc -n "$ns" qdisc add dev "$dev" root netem delay "${delay}ms" rate "${mbps}mbit" limit "$lim" 2>&1); then
                    echo "$prog: cannot add ${delay} ms of delay with tc netem ($err): this kernel lacks sch_netem;" \
                         "shape only the rate here and simulate the delay with pipezip's --link-latency-ms" >&2
                    exit 1
                fi
            else
                run_ip "shape link $i" tc -n "$ns" qdisc add dev "$dev" root tbf rate "${mbps}mbit" burst "$burst" latency 400ms || exit 1
            fi
        done
    done
    # The kernel reports a new veth's carrier (operstate UP) a little after `link set
    # up`; UCX ignores interfaces that are not running yet, so wait for all of them.
    for ((i = 0; i < S; i++)); do
        n=$(ns_name "$i")
        for dev in pzl pzr; do
            { [ "$dev" = pzl ] && [ "$i" = 0 ]; } || { [ "$dev" = pzr ] && [ "$i" = $((S - 1)) ]; } && continue
            wait_up "$n" "$dev"
        done
    done
    if [ "$S" -gt 2 ]; then
        for ((i = 0; i < S; i++)); do
            n=$(ns_name "$i")
            if [ "$i" -gt 0 ] && [ "$i" -lt $((S - 1)) ]; then
                run_ip "enable forwarding in $n" ip netns exec "$n" sysctl -q -w net.ipv4.ip_forward=1 || exit 1
            fi
            # links left of i-1 via the left neighbour, right of i via the right neighbour
            for ((j = 0; j < S - 1; j++)); do
                if [ "$j" -lt $((i - 1)) ]; then
                    run_ip "route in $n" ip -n "$n" route add "10.$subnet_x.$j.0/24" via "$(addr $((i - 1)) 1)" dev pzl || exit 1
                elif [ "$j" -gt "$i" ]; then
                    run_ip "route in $n" ip -n "$n" route add "10.$subnet_x.$j.0/24" via "$(addr "$i" 2)" dev pzr || exit 1
                fi
            done
        done
    fi
    master=$(addr 0 1)
    echo "$prog: $S namespaces ${tag}_0..$((S - 1)), links tbf ${mbps} Mbit/s (burst $burst) both ends; master $master:$port; UCX_TLS=tcp" >&2
}

S=$stages
W=$((S * replicas))
if [ "$replicas" -gt 1 ]; then build_star; else build_chain; fi
rep_args=()
[ "$replicas" -gt 1 ] && rep_args=(--replicas "$replicas")

# ---- ranks
for ((i = 0; i < W; i++)); do
    # unshare -m + a private tmpfs on /dev/shm: like hosts, the namespaces
    # share no memory, so the replicas' all-reduce cannot take its
    # shared-memory path (runtime/dp/shm.c) around the shaped links
    ip netns exec "$(ns_name "$i")" unshare -m --propagation private \
        sh -c 'mount -t tmpfs -o mode=1777 pzshm /dev/shm && exec "$@"' sh env RANK="$i" WORLD_SIZE="$W" LOCAL_RANK="$i" LOCAL_WORLD_SIZE="$W" \
        MASTER_ADDR="$master" MASTER_PORT="$port" UCX_TLS=tcp \
        "$pz" train --stages "$S" "${rep_args[@]}" "${train_args[@]}" \
        2> >(sed -u "s/^/[rank $i] /" >&2) &
    pids+=("$!")
done

# wait for all; on the first failure name the rank and stop the others
failed=""
running=("${pids[@]}")
while [ ${#running[@]} -gt 0 ]; do
    done_pid=""
    wait -n -p done_pid "${running[@]}"
    st=$?
    [ -n "$done_pid" ] || break
    rest=()
    for p in "${running[@]}"; do [ "$p" = "$done_pid" ] || rest+=("$p"); done
    running=("${rest[@]}")
    if [ "$st" != 0 ] && [ -z "$failed" ]; then
        for ((i = 0; i < W; i++)); do [ "${pids[$i]}" = "$done_pid" ] && failed=$i; done
        if [ "$st" -gt 128 ]; then
            echo "$prog: rank $failed was killed by signal $((st - 128)); stopping the other ranks" >&2
        else
            echo "$prog: rank $failed exited with status $st; stopping the other ranks" >&2
        fi
        for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    fi
done
wait   # the stderr forwarders
pids=()
if [ -n "$failed" ]; then
    echo "$prog: failed (rank $failed)" >&2
    exit 1
fi
exit 0
