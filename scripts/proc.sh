# Process helpers shared by the test scripts (source it; bash only).
#
#   stop PID        SIGTERM, up to 5 s for it to exit, then SIGKILL; reaps it
#   wait_ping PORT  until redis-cli PING on 127.0.0.1:PORT answers PONG
#                   (10 s at most; returns 1 when it never does)

stop() {
    local pid=$1 _
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

wait_ping() {
    local _
    for _ in $(seq 1 100); do
        [ "$(timeout 2 redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    return 1
}
