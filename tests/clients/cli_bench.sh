#!/usr/bin/env bash
# redis-cli and redis-benchmark against cellgate. redis-cli output through
# the proxy must equal its output straight against Redis (same commands, key
# prefixes differ). redis-benchmark: a smoke test (exit 0, non-zero rates;
# no timing assertions).
# Environment: PROXY_PORT, REDIS_PORT, DIRECT_TAG (cluster mode: every
# direct key carries this hash tag, REDIS_PORT is the master that owns it),
# NODE_PORTS and CG_PID (for upstream_conns.sh).
set -uo pipefail
P=$PROXY_PORT
R=$REDIS_PORT
HERE=$(cd "$(dirname "$0")" && pwd)
DP="${DIRECT_TAG:-}cli:d:"  # key prefix straight to Redis
PP="cli:p:"                 # key prefix through cellgate
T=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-cli.XXXXXX")
BG=""
trap '[ -n "$BG" ] && kill $BG 2>/dev/null; rm -rf "$T"' EXIT
failed=0

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1: $2"; failed=$((failed + 1)); }
one_line() { tr '\r\n' '  ' | cut -c1-300; }

cli() {  # port, args...: output and exit status, both
    local port=$1; shift
    timeout 10 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>&1
    echo "[exit $?]"
}

# Runs the same redis-cli invocation against cellgate and Redis; {} in the
# arguments becomes the key prefix of each side. Passes when the outputs
# match, and (when given with -e) equal the expected text.
same() {  # name [-e expected] args...
    local name=$1; shift
    local want="" have_want=0
    if [ "$1" = -e ]; then want=$2; have_want=1; shift 2; fi
    local pa=() da=() a
    for a in "$@"; do pa+=("${a//\{\}/$PP}"); da+=("${a//\{\}/$DP}"); done
    local d p
    d=$(cli "$R" "${da[@]}")
    p=$(cli "$P" "${pa[@]}")
    d=${d//"$DP"/}
    p=${p//"$PP"/}
    if [ "$have_want" -eq 1 ] && [ "$d" != "$want" ]; then
        notok "$name" "direct Redis gave '$(echo "$d" | one_line)', test expects '$(echo "$want" | one_line)' (test bug?)"
    elif [ "$p" != "$d" ]; then
        notok "$name" "through cellgate '$(echo "$p" | one_line)', straight to Redis '$(echo "$d" | one_line)'"
    else
        ok "$name"
    fi
}

# 20 redis-cli processes with default options, each holding its connection
# while the Redis nodes are asked how many connections cellgate has
# (upstream_conns.sh). Commands come on standard input, one line each, as
# from a person or a script: redis-cli's REPL, whose handshake is
# COMMAND DOCS (for its hints); a command, 2 s idle, a command again.
name="redis-cli: 20 clients with default options use only cellgate's shared upstream connections"
pids=()
for i in $(seq 1 20); do
    { echo "incr ${PP}cc:$i"; sleep 2; echo "incr ${PP}cc:$i"; } |
        timeout 10 redis-cli -h 127.0.0.1 -p "$P" >"$T/cc-$i.out" 2>&1 &
    pids+=($!)
done
for _ in $(seq 1 50); do  # until every one ran its first command
    n=0
    for i in $(seq 1 20); do [ -s "$T/cc-$i.out" ] && n=$((n + 1)); done
    [ "$n" -eq 20 ] && break
    sleep 0.05
done
line=$(bash "$HERE/upstream_conns.sh"); rc=$?
echo "# redis-cli: cellgate's connections per Redis node, 20 redis-cli open ($n had answered): $line"
wait "${pids[@]}"
if [ "$rc" -eq 0 ] && [ "$n" -eq 20 ]; then ok "$name"
else notok "$name" "too many connections from cellgate, or clients not connected ($n of 20 answered): $line"; fi

nl=$'\n'
same "redis-cli: ping" -e "PONG${nl}[exit 0]" ping
same "redis-cli: set k v" -e "OK${nl}[exit 0]" set {}k v
same "redis-cli: get k" -e "v${nl}[exit 0]" get {}k
same "redis-cli: get of a missing key" -e "${nl}[exit 0]" get {}missing
same "redis-cli: echo with spaces" -e "hello world${nl}[exit 0]" echo "hello world"
same "redis-cli: incr" -e "1${nl}[exit 0]" incr {}n
same "redis-cli: rpush + lrange" -e "3${nl}[exit 0]" rpush {}l a "b c" d
same "redis-cli: lrange (raw)" -e "a${nl}b c${nl}d${nl}[exit 0]" lrange {}l 0 -1
same "redis-cli: lrange (--no-raw)" -e "1) \"a\"${nl}2) \"b c\"${nl}3) \"d\"${nl}[exit 0]" --no-raw lrange {}l 0 -1
same "redis-cli: hset + hgetall" -e "f${nl}v${nl}[exit 0]" eval "redis.call('hset', KEYS[1], 'f', 'v') return redis.call('hgetall', KEYS[1])" 1 {}h
same "redis-cli: error reply" -e "ERR value is not an integer or out of range${nl}${nl}[exit 0]" incr {}k
same "redis-cli: unknown command" nosuchcommand a b
same "redis-cli: -r 100 incr (repeat)" -r 100 incr {}r
same "redis-cli: -x (value from stdin)" -x set {}x </etc/hostname
same "redis-cli: client setname + getname" client setname cli-app

# redis-cli -3 speaks RESP3 (HELLO 3): maps, sets, doubles, nulls as Redis
# sends them, rendered by redis-cli's RESP3 printer.
same "redis-cli -3: hgetall (map)" -e "1# \"f\" => \"v\"${nl}[exit 0]" -3 --no-raw hgetall {}h
same "redis-cli -3: zadd" -e "2${nl}[exit 0]" -3 zadd {}z 1.5 a 2 b
same "redis-cli -3: zrange withscores (doubles)" \
    -e "1) 1) \"a\"${nl}   2) (double) 1.5${nl}2) 1) \"b\"${nl}   2) (double) 2${nl}[exit 0]" \
    -3 --no-raw zrange {}z 0 -1 withscores
same "redis-cli -3: sadd" -e "1${nl}[exit 0]" -3 sadd {}s m
same "redis-cli -3: smembers (set)" -e "1~ \"m\"${nl}[exit 0]" -3 --no-raw smembers {}s
same "redis-cli -3: get of a missing key (null)" -e "(nil)${nl}[exit 0]" -3 --no-raw get {}missing
same "redis-cli -3: client getname (null)" -e "(nil)${nl}[exit 0]" -3 --no-raw client getname
same "redis-cli -3: a double from Lua" -e "(double) 1.5${nl}[exit 0]" -3 --no-raw eval "return {double=1.5}" 0
same "redis-cli -3: error reply" -3 --no-raw incr {}k
out=$(timeout 10 redis-cli -3 -p "$P" --no-raw cl.throttle cli3:user 15 30 60 2>&1)
want="1) (integer) 0${nl}2) (integer) 16${nl}3) (integer) 15${nl}4) (integer) -1${nl}5) (integer) 2"
if [ "$out" = "$want" ]; then ok "redis-cli -3: cl.throttle through cellgate"
else notok "redis-cli -3: cl.throttle through cellgate" "printed '$(echo "$out" | one_line)'"; fi
out=$(timeout 10 redis-cli -3 -p "$P" --no-raw hello 3 2>&1)
if echo "$out" | grep -qx '3# "proto" => (integer) 3' && echo "$out" | grep -qx '1# "server" => "cellgate"'; then
    ok "redis-cli -3: hello 3 is a map with proto 3"
else
    notok "redis-cli -3: hello 3 is a map with proto 3" "printed '$(echo "$out" | one_line)'"
fi
out=$(timeout 10 redis-cli -3 -p "$P" info 2>&1 | head -n 1 | tr -d '\r')
if [ "$out" = "# Proxy" ]; then ok "redis-cli -3: info (verbatim string, proxy section first)"
else notok "redis-cli -3: info (verbatim string, proxy section first)" "first line '$out'"; fi
out=$(timeout 10 redis-cli -3 -p "$P" info server 2>&1 | tr -d '\r')
if grep -q '^redis_version:' <<<"$out" && ! grep -q '^used_memory:' <<<"$out"; then
    ok "redis-cli -3: info server (one section, forwarded)"
else
    notok "redis-cli -3: info server (one section, forwarded)" "printed '$(echo "$out" | head -n 5 | one_line)'"
fi

# Commands on standard input, one per line (no arguments after the port):
# redis-cli's REPL, which opens with COMMAND DOCS. Three keys whose hash
# tags a, b, c (slots 15495, 3300, 7365) lie on three different masters of
# a 3-master cluster, so every master is asked, whichever node the session
# started on.
stdin_cmds() {  # k1 k2 k3
    printf 'set %s 1\nset %s 1\nset %s 1\nincr %s\nincr %s\nget %s\nget %s\nping\n' \
        "$1" "$2" "$3" "$1" "$2" "$3" "$1"
}
d=$(stdin_cmds "${DP}stdin:a" "${DP}stdin:b" "${DP}stdin:c" | timeout 10 redis-cli -p "$R" 2>&1)
p=$(stdin_cmds "${PP}stdin:{a}" "${PP}stdin:{b}" "${PP}stdin:{c}" | timeout 10 redis-cli -p "$P" 2>&1)
want="OK${nl}OK${nl}OK${nl}2${nl}2${nl}1${nl}2${nl}PONG"
if [ "$p" = "$want" ] && [ "$d" = "$want" ]; then ok "redis-cli: commands on stdin"
else notok "redis-cli: commands on stdin" "through cellgate '$(echo "$p" | one_line)', straight to Redis '$(echo "$d" | one_line)'"; fi

# --pipe: raw RESP on stdin (redis-cli appends an ECHO to find the last reply).
resp() {  # args... -> one RESP command
    local a
    printf '*%d\r\n' "$#"
    for a in "$@"; do printf '$%d\r\n%s\r\n' "${#a}" "$a"; done
}
gen_pipe() {  # prefix
    local i
    for i in $(seq 1 1000); do resp SET "$1pipe:$i" "value $i"; done
    resp INCR "$1pipe:counter"
    resp INCR "$1pipe:1"   # an error reply: the value is not an integer
    resp RPUSH "$1pipe:list" a b c
}
gen_pipe "$PP" >"$T/pipe-p.resp"
gen_pipe "$DP" >"$T/pipe-d.resp"
pout=$(timeout 20 redis-cli -p "$P" --pipe <"$T/pipe-p.resp" 2>&1); prc=$?
dout=$(timeout 20 redis-cli -p "$R" --pipe <"$T/pipe-d.resp" 2>&1); drc=$?
pv=$(timeout 5 redis-cli -c -p "$R" get cli:p:pipe:777)  # -c: its node, in cluster mode
if [ "$prc" -eq 1 ] && [ "$drc" -eq 1 ] && echo "$pout" | grep -q '^errors: 1, replies: 1003$' \
        && echo "$dout" | grep -q '^errors: 1, replies: 1003$' && [ "$pv" = "value 777" ]; then
    ok "redis-cli: --pipe with RESP input (1003 commands, one error)"
else
    notok "redis-cli: --pipe with RESP input (1003 commands, one error)" \
        "through cellgate exit $prc '$(echo "$pout" | one_line)' (pipe:777=$pv), straight to Redis exit $drc '$(echo "$dout" | one_line)'"
fi
resp SET cli:pipe2 ok >"$T/pipe2.resp"
pout=$(timeout 10 redis-cli -p "$P" --pipe <"$T/pipe2.resp" 2>&1); prc=$?
if [ "$prc" -eq 0 ] && echo "$pout" | grep -q '^errors: 0, replies: 1$'; then
    ok "redis-cli: --pipe without errors exits 0"
else
    notok "redis-cli: --pipe without errors exits 0" "exit $prc '$(echo "$pout" | one_line)'"
fi

# --scan walks the keyspace with SCAN (in cluster mode, every master's).
for i in $(seq 1 150); do resp SET "cli:scan:$i" "$i"; done >"$T/scan.resp"
timeout 10 redis-cli -p "$P" --pipe <"$T/scan.resp" >/dev/null
n=$(timeout 20 redis-cli -p "$P" --scan --pattern 'cli:scan:*' | sort -u | wc -l)
if [ "$n" -eq 150 ]; then ok "redis-cli: --scan --pattern (150 keys)"
else notok "redis-cli: --scan --pattern (150 keys)" "found $n distinct keys"; fi

# SUBSCRIBE in one redis-cli, PUBLISH from another.
timeout 10 redis-cli -p "$P" subscribe cli:chan >"$T/sub.out" 2>&1 &
BG=$!
for _ in $(seq 1 50); do grep -q '^1$' "$T/sub.out" 2>/dev/null && break; sleep 0.1; done
n=$(timeout 5 redis-cli -p "$P" publish cli:chan "hi there")
for _ in $(seq 1 50); do grep -q '^hi there$' "$T/sub.out" 2>/dev/null && break; sleep 0.1; done
kill "$BG" 2>/dev/null; wait "$BG" 2>/dev/null; BG=""
if [ "$n" = 1 ] && [ "$(tr '\n' '|' <"$T/sub.out")" = "subscribe|cli:chan|1|message|cli:chan|hi there|" ]; then
    ok "redis-cli: subscribe + publish"
else
    notok "redis-cli: subscribe + publish" "publish said '$n', subscriber printed '$(one_line <"$T/sub.out")'"
fi

# The same with -3: the confirmation and the message are RESP3 pushes.
timeout 10 redis-cli -3 -p "$P" subscribe cli3:chan >"$T/sub3.out" 2>&1 &
BG=$!
for _ in $(seq 1 50); do grep -q '^1$' "$T/sub3.out" 2>/dev/null && break; sleep 0.1; done
n=$(timeout 5 redis-cli -p "$P" publish cli3:chan "hi there")
for _ in $(seq 1 50); do grep -q '^hi there$' "$T/sub3.out" 2>/dev/null && break; sleep 0.1; done
kill "$BG" 2>/dev/null; wait "$BG" 2>/dev/null; BG=""
if [ "$n" = 1 ] && [ "$(tr '\n' '|' <"$T/sub3.out")" = "subscribe|cli3:chan|1|message|cli3:chan|hi there|" ]; then
    ok "redis-cli -3: subscribe + publish (pushes)"
else
    notok "redis-cli -3: subscribe + publish (pushes)" "publish said '$n', subscriber printed '$(one_line <"$T/sub3.out")'"
fi

# ---------------------------------------------------------------- redis-benchmark
bench() {  # name, tests (comma separated), extra args...
    local name=$1 tests=$2; shift 2
    local out rc bad="" t line rate
    out=$(timeout 60 redis-benchmark -h 127.0.0.1 -p "$P" -t "$tests" "$@" -q 2>&1 | tr '\r' '\n')
    rc=${PIPESTATUS[0]}
    for t in ${tests//,/ }; do
        t=${t^^}
        line=$(echo "$out" | grep -E "^${t}: [0-9.]+ requests per second" | tail -n 1)
        rate=$(echo "$line" | sed -E 's/^[A-Z]+: ([0-9.]+) requests per second.*/\1/')
        if [ -z "$line" ] || ! awk -v r="$rate" 'BEGIN { exit !(r > 0) }'; then
            bad="$bad $t"
        fi
    done
    if [ "$rc" -eq 0 ] && [ -z "$bad" ]; then
        ok "$name"
        echo "$out" | grep 'requests per second' | sed 's/^/# /'
    else
        notok "$name" "exit $rc, no positive rate for:${bad:- (none)}; output '$(echo "$out" | grep -v 'rps=' | one_line)'"
    fi
}
bench "redis-benchmark: set,get,incr,lpush,lpop -n 20000 -c 20" set,get,incr,lpush,lpop -n 20000 -c 20
bench "redis-benchmark: set,get pipelined (-P 16)" set,get -n 20000 -c 10 -P 16

# The data it wrote reads back through the proxy like any other.
v=$(timeout 5 redis-cli -p "$P" get key:__rand_int__)
dv=$(timeout 5 redis-cli -c -p "$R" get key:__rand_int__)
if [ -n "$v" ] && [ "$v" = "$dv" ] && [ "${#v}" -eq 3 ]; then ok "redis-benchmark: written value reads back"
else notok "redis-benchmark: written value reads back" "get key:__rand_int__ through cellgate '$v', straight to Redis '$dv'"; fi

[ "$failed" -eq 0 ]
