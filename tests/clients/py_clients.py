#!/usr/bin/env python3
"""redis-py against cellgate, compared with the same calls straight against Redis.

Used the way an application uses redis-py: redis.Redis() with its connection
pool, pipelines, transactions, pub/sub, blocking pops. Every check runs its
scenario once against Redis directly and once through the proxy (each on its
own key prefix) and compares the results; most also compare with the value
Redis is known to give, so "both wrong the same way" does not pass.

Environment (run.sh sets it): PROXY_PORT, REDIS_PORT (127.0.0.1), CG_MODE
(single or cluster), DIRECT_TAG (the hash tag of every direct key in cluster
mode, where REDIS_PORT is the master that owns it), NODE_PORTS, CG_PID (for
upstream_conns.sh). Keys that a command must find on one node (MSETNX, SINTER,
RPOPLPUSH, a transaction...) share a hash tag in their name; the others spread
over every master in cluster mode. Prints `ok - name` or `not ok - name: why`
per check; exits 1 if any check failed.
"""
import os
import socket
import subprocess
import sys
import threading
import time
import traceback

import redis

HOST = "127.0.0.1"
PROXY_PORT = int(os.environ["PROXY_PORT"])
REDIS_PORT = int(os.environ["REDIS_PORT"])
CLUSTER = os.environ.get("CG_MODE") == "cluster"
DIRECT_TAG = os.environ.get("DIRECT_TAG", "")
NODE_PORTS = [int(p) for p in os.environ.get("NODE_PORTS", str(REDIS_PORT)).split(",")]
# The masters' INFO tcp_port (their plain ports: the TLS modes' NODE_PORTS
# are their tls-ports).
INFO_PORTS = [int(p) for p in os.environ.get("NODE_INFO_PORTS", ",".join(map(str, NODE_PORTS))).split(",")]
HERE = os.path.dirname(os.path.abspath(__file__))
# Bounds every network wait: a hang becomes a failed check, not a stuck suite.
SOCK_TIMEOUT = 5.0

failed = 0
passed = 0


# TLS modes (run.sh): every connection, to cellgate and to Redis, speaks TLS
# and checks the server's certificate against this CA.
TLS_CA = os.environ.get("CG_TLS_CA")
TLS_KW = {"ssl": True, "ssl_ca_certs": TLS_CA} if TLS_CA else {}


def client(port, decode=True, **kw):
    kw = {**TLS_KW, **kw}
    return redis.Redis(host=HOST, port=port, socket_timeout=SOCK_TIMEOUT,
                       socket_connect_timeout=SOCK_TIMEOUT,
                       decode_responses=decode, **kw)


class Target:
    """One side of a comparison: a client pool plus a key prefix."""

    def __init__(self, label, port, prefix):
        self.label = label
        self.port = port
        self.prefix = prefix
        self.r = client(port)
        self.b = client(port, decode=False)

    def k(self, name):
        return self.prefix + name

    def other(self, decode=True):
        """A second, independent application connection to the same side."""
        return client(self.port, decode=decode)


DIRECT = Target("redis", REDIS_PORT, DIRECT_TAG + "py:d:")
PROXY = Target("cellgate", PROXY_PORT, "py:p:")

CHECKS = []


def check(name):
    def deco(fn):
        CHECKS.append((name, fn))
        return fn
    return deco


class Fail(Exception):
    pass


def expect(cond, why):
    if not cond:
        raise Fail(why)


def same(scenario, expected=None):
    """Runs scenario(target) against Redis, then through cellgate; they must
    agree (and equal `expected` when given). Returns the proxy's result."""
    d = scenario(DIRECT)
    p = scenario(PROXY)
    if expected is not None:
        expect(d == expected, f"direct Redis gave {short(d)}, test expects {short(expected)} (test bug?)")
    expect(p == d, f"through cellgate {short(p)}, straight to Redis {short(d)}")
    return p


def short(v, n=300):
    s = repr(v)
    return s if len(s) <= n else s[:n] + f"...({len(s)} chars)"


def raw(t, *args):
    """One command on a pooled connection, reply without redis-py's callbacks."""
    conn = t.b.connection_pool.get_connection(args[0])
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        t.b.connection_pool.release(conn)


def error_of(fn):
    """(exception class name, message) that fn raised, or None."""
    try:
        fn()
    except redis.exceptions.RedisError as e:
        return (type(e).__name__, str(e))
    return None


# ---------------------------------------------------------------- connection count

def upstream_conns():
    """(exit status, summary line) of upstream_conns.sh: cellgate's
    connections on every Redis node, and whether one is over the limit."""
    r = subprocess.run(["bash", os.path.join(HERE, "upstream_conns.sh")],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout.strip()


@check("py: 20 clients with default options use only cellgate's shared upstream connections")
def _():
    # Each its own redis.Redis (its own pool), as 20 processes of an
    # application would; every one runs commands over keys of many slots
    # and keeps its connection open while the nodes are asked.
    conns = [redis.Redis(host=HOST, port=PROXY_PORT, **TLS_KW) for _ in range(20)]
    try:
        for i, c in enumerate(conns):
            c.set(PROXY.k(f"cc:{i}"), i)
            expect(c.get(PROXY.k(f"cc:{i}")) == str(i).encode(), f"client {i} read back a wrong value")
            c.incr(PROXY.k("cc:n"))
        rc, line = upstream_conns()
        print(f"# py: cellgate's connections per Redis node, 20 redis-py clients open: {line}", flush=True)
        expect(rc == 0, f"too many connections from cellgate: {line}")
    finally:
        for c in conns:
            c.close()


# ---------------------------------------------------------------- basics

@check("py: ping")
def _():
    same(lambda t: t.r.ping(), True)
    same(lambda t: raw(t, "PING", "hi"), b"hi")


@check("py: echo")
def _():
    same(lambda t: t.r.echo("hello world"), "hello world")
    same(lambda t: t.b.echo(b"\x00\r\n\xff"), b"\x00\r\n\xff")


@check("py: select 0")
def _():
    same(lambda t: t.r.execute_command("SELECT", 0), True)


@check("py: strings")
def _():
    def sc(t):
        r, k = t.r, t.k
        out = [r.set(k("s1"), "v1"), r.get(k("s1")), r.get(k("missing")),
               r.set(k("s1"), "v2", nx=True), r.set(k("s1"), "v3", xx=True),
               r.getset(k("s1"), "v4"), r.append(k("s1"), "-tail"),
               r.strlen(k("s1")), r.getrange(k("s1"), 1, 4),
               r.setrange(k("s1"), 0, "V"), r.get(k("s1")),
               r.mset({k("m1"): "a", k("m2"): "b", k("m3"): ""}),
               r.mget([k("m1"), k("m2"), k("m3"), k("nope")]),
               r.set(k("{nx}1"), "a"), r.msetnx({k("{nx}1"): "x", k("{nx}9"): "y"}),
               r.setnx(k("n1"), "first"), r.setnx(k("n1"), "second"),
               r.get(k("n1")), r.getdel(k("n1")), r.exists(k("n1")),
               r.exists(k("m1"), k("m2"), k("nope")),
               r.delete(k("m1"), k("m2"), k("nope")),
               r.type(k("s1"))]
        return out
    same(sc, [True, "v1", None, None, True, "v3", 7, 7, "4-ta", 7, "V4-tail",
              True, ["a", "b", "", None], True, False, True, False, "first", "first",
              0, 2, 2, "string"])


@check("py: binary values")
def _():
    allbytes = bytes(range(256))
    tricky = b"$5\r\nhello\r\n*2\r\n+OK\r\n-ERR x\r\n:1\r\n\r\n"
    big = os.urandom(1 << 20)  # 1 MiB: spans many reads on both hops

    def sc(t):
        b, k = t.b, t.k
        b.set(k("bin:all"), allbytes)
        b.set(k("bin:tricky"), tricky)
        b.set(k("bin:empty"), b"")
        b.set(k("bin:big"), big)
        b.set(k("bin:\x00key\r\n"), b"key with NUL and CRLF")
        return [b.get(k("bin:all")) == allbytes, b.get(k("bin:tricky")) == tricky,
                b.get(k("bin:empty")), b.get(k("bin:big")) == big,
                b.strlen(k("bin:big")), b.get(k("bin:\x00key\r\n")),
                b.hset(k("bin:h"), b"\xff\x00", allbytes),
                b.hget(k("bin:h"), b"\xff\x00") == allbytes]
    same(sc, [True, True, b"", True, 1 << 20, b"key with NUL and CRLF", 1, True])


@check("py: counters")
def _():
    def sc(t):
        r, k = t.r, t.k
        return [r.incr(k("c")), r.incr(k("c")), r.incrby(k("c"), 40),
                r.decr(k("c")), r.decrby(k("c"), 2), r.get(k("c")),
                r.incrbyfloat(k("f"), 1.5), r.incrbyfloat(k("f"), -0.25),
                r.incrby(k("neg"), -9223372036854775807), r.get(k("neg"))]
    same(sc, [1, 2, 42, 41, 39, "39", 1.5, 1.25, -9223372036854775807,
              "-9223372036854775807"])


@check("py: hashes")
def _():
    def sc(t):
        r, k = t.r, t.k
        return [r.hset(k("h"), mapping={"f1": "1", "f2": "two", "f3": "3"}),
                r.hget(k("h"), "f2"), r.hget(k("h"), "nope"),
                r.hgetall(k("h")), r.hincrby(k("h"), "f1", 10),
                r.hincrbyfloat(k("h"), "f3", 0.5), r.hlen(k("h")),
                r.hexists(k("h"), "f2"), r.hdel(k("h"), "f2", "nope"),
                sorted(r.hkeys(k("h"))), sorted(r.hvals(k("h"))),
                r.hmget(k("h"), ["f1", "nope", "f3"]),
                r.hsetnx(k("h"), "f1", "x"), r.hstrlen(k("h"), "f1"),
                r.hgetall(k("empty"))]
    same(sc, [3, "two", None, {"f1": "1", "f2": "two", "f3": "3"}, 11, 3.5, 3,
              True, 1, ["f1", "f3"], ["11", "3.5"], ["11", None, "3.5"], False, 2, {}])


@check("py: lists")
def _():
    def sc(t):
        r, k = t.r, t.k
        return [r.rpush(k("l"), "a", "b", "c"), r.lpush(k("l"), "z"),
                r.lrange(k("l"), 0, -1), r.llen(k("l")), r.lindex(k("l"), 1),
                r.lset(k("l"), 1, "A"), r.linsert(k("l"), "after", "b", "b2"),
                r.lrem(k("l"), 0, "b2"), r.lpop(k("l")), r.rpop(k("l")),
                r.lpop(k("l"), 5), r.lpop(k("l")), r.llen(k("l")),
                r.rpush(k("{l}2"), *range(10)), r.ltrim(k("{l}2"), 2, 5),
                r.lrange(k("{l}2"), 0, -1), r.lpos(k("{l}2"), "4"),
                r.rpoplpush(k("{l}2"), k("{l}3")), r.lmove(k("{l}3"), k("{l}2"), "LEFT", "LEFT"),
                r.lrange(k("{l}2"), 0, -1)]
    same(sc, [3, 4, ["z", "a", "b", "c"], 4, "a", True, 5, 1, "z", "c", ["A", "b"],
              None, 0, 10, True, ["2", "3", "4", "5"], 2, "5", "5",
              ["5", "2", "3", "4"]])


@check("py: sets")
def _():
    def sc(t):
        r, k = t.r, t.k
        return [r.sadd(k("{s}"), "a", "b", "c", "a"), r.scard(k("{s}")),
                sorted(r.smembers(k("{s}"))), r.sismember(k("{s}"), "b"),
                r.sismember(k("{s}"), "x"), r.smismember(k("{s}"), ["a", "x"]),
                r.srem(k("{s}"), "a", "x"), r.sadd(k("{s}2"), "b", "d"),
                sorted(r.sinter(k("{s}"), k("{s}2"))), sorted(r.sunion(k("{s}"), k("{s}2"))),
                sorted(r.sdiff(k("{s}"), k("{s}2"))),
                r.sinterstore(k("{s}3"), [k("{s}"), k("{s}2")]), r.smembers(k("{s}3")),
                r.smove(k("{s}"), k("{s}2"), "c"), sorted(r.smembers(k("{s}2"))),
                r.smembers(k("nope"))]
    same(sc, [3, 3, ["a", "b", "c"], True, False, [1, 0], 1, 2, ["b"],
              ["b", "c", "d"], ["c"], 1, {"b"}, True, ["b", "c", "d"], set()])


@check("py: sorted sets with scores")
def _():
    def sc(t):
        r, k = t.r, t.k
        return [r.zadd(k("z"), {"a": 1, "b": 2.5, "c": -3, "d": 1e10}),
                r.zrange(k("z"), 0, -1, withscores=True),
                r.zrevrange(k("z"), 0, 1, withscores=True),
                r.zscore(k("z"), "b"), r.zscore(k("z"), "nope"),
                r.zincrby(k("z"), 2, "a"), r.zrank(k("z"), "a"), r.zrevrank(k("z"), "a"),
                r.zcard(k("z")), r.zcount(k("z"), 0, 5),
                r.zrangebyscore(k("z"), "-inf", 3, withscores=True),
                r.zrangebyscore(k("z"), "(0", "+inf", start=0, num=2),
                r.zrem(k("z"), "d", "nope"), r.zpopmin(k("z")), r.zpopmax(k("z"), 1),
                r.zadd(k("z"), {"b": 9}, xx=True, ch=True),
                r.zadd(k("z"), {"a": 100}, gt=True, ch=True),
                r.zrange(k("z"), 0, -1, withscores=True),
                r.zrangebylex(k("zl"), "-", "+")]
    same(sc, [4, [("c", -3.0), ("a", 1.0), ("b", 2.5), ("d", 1e10)],
              [("d", 1e10), ("b", 2.5)], 2.5, None, 3.0, 2, 1, 4, 2,
              [("c", -3.0), ("b", 2.5), ("a", 3.0)], ["b", "a"], 1, [("c", -3.0)],
              [("a", 3.0)], 1, 1, [("b", 9.0), ("a", 100.0)], []])


@check("py: expiry")
def _():
    def sc(t):
        r, k = t.r, t.k
        r.set(k("e1"), "v", ex=100)
        ttl = r.ttl(k("e1"))
        r.pexpire(k("e1"), 50000)
        pttl = r.pttl(k("e1"))
        persisted = r.persist(k("e1"))
        after_persist = r.ttl(k("e1"))
        r.set(k("e2"), "v")
        exp = r.expire(k("e2"), 1000)
        r.expireat(k("e3"), int(time.time()) + 500)  # missing key: False
        r.set(k("short"), "v", px=60)
        missing_ttl = r.ttl(k("nope"))
        time.sleep(0.3)
        gone = r.get(k("short"))
        getex = (r.set(k("e4"), "x"), r.getex(k("e4"), ex=30), 0 < r.ttl(k("e4")) <= 30)
        return [0 < ttl <= 100, 40000 < pttl <= 50000, persisted, after_persist,
                exp, 0 < r.ttl(k("e2")) <= 1000, r.exists(k("e3")), missing_ttl, gone, getex]
    same(sc, [True, True, True, -1, True, True, 0, -2, None, (True, "x", True)])


@check("py: key management (rename, copy, dump/restore, type)")
def _():
    def sc(t):
        r, b, k = t.r, t.b, t.k
        r.rpush(k("{km}:l"), "a", "b")
        dumped = b.dump(k("{km}:l"))  # binary serialization payload
        return [r.rename(k("{km}:l"), k("{km}:l2")), r.exists(k("{km}:l")),
                r.renamenx(k("{km}:l2"), k("{km}:l2")), r.copy(k("{km}:l2"), k("{km}:l3")),
                r.type(k("{km}:l3")), b.restore(k("{km}:r"), 0, dumped),
                r.lrange(k("{km}:r"), 0, -1), error_of(lambda: b.restore(k("{km}:r"), 0, dumped)),
                error_of(lambda: b.restore(k("{km}:bad"), 0, b"\x00garbage")),
                r.object("encoding", k("{km}:r")) in ("quicklist", "listpack", "ziplist"), r.unlink(k("{km}:r"), k("{km}:l3")),
                r.touch(k("{km}:l2"))]
    same(sc, [True, 0, False, True, "list", b"OK", ["a", "b"],
              ("ResponseError", "BUSYKEY Target key name already exists."),
              ("ResponseError", "DUMP payload version or checksum are wrong"),
              True, 2, 1])


@check("py: streams")
def _():
    def sc(t):
        r, k = t.r, t.k
        s = k("st")
        ids = [r.xadd(s, {"n": str(i), "bin": "x\r\ny"}, id=f"1-{i + 1}") for i in range(5)]
        grp = r.xgroup_create(s, "g", id="0")
        read = r.xreadgroup("g", "c1", {s: ">"}, count=2)
        read = [(name.replace(t.prefix, ""), msgs) for name, msgs in read]
        return [ids, r.xlen(s), r.xrange(s, "-", "+", count=2), r.xrevrange(s, count=1),
                grp, read, r.xack(s, "g", "1-1"), r.xpending(s, "g")["pending"],
                r.xtrim(s, maxlen=3, approximate=False), r.xlen(s),
                r.xread({s: "1-4"})[0][1]]
    same(sc, [["1-1", "1-2", "1-3", "1-4", "1-5"], 5,
              [("1-1", {"n": "0", "bin": "x\r\ny"}), ("1-2", {"n": "1", "bin": "x\r\ny"})],
              [("1-5", {"n": "4", "bin": "x\r\ny"})], True,
              [("st", [("1-1", {"n": "0", "bin": "x\r\ny"}), ("1-2", {"n": "1", "bin": "x\r\ny"})])],
              1, 1, 2, 3, [("1-5", {"n": "4", "bin": "x\r\ny"})]])


# ---------------------------------------------------------------- pipelines and transactions

@check("py: pipeline (transaction=False) of 1000 commands")
def _():
    def sc(t):
        p = t.r.pipeline(transaction=False)
        for i in range(1000):
            m = i % 4
            if m == 0:
                p.set(t.k(f"pl:{i}"), f"value-{i}")
            elif m == 1:
                p.get(t.k(f"pl:{i - 1}"))
            elif m == 2:
                p.incr(t.k("pl:counter"))
            else:
                p.rpush(t.k("pl:list"), i)
        res = p.execute()
        expect(len(res) == 1000, f"{t.label}: {len(res)} replies for 1000 commands")
        return res
    res = same(sc)
    for i in range(1000):
        m = i % 4
        want = (True if m == 0 else f"value-{i - 1}" if m == 1
                else i // 4 + 1 if m == 2 else i // 4 + 1)
        expect(res[i] == want, f"reply {i} is {res[i]!r}, wanted {want!r} (replies out of order?)")


@check("py: pipeline with transaction=True (MULTI/EXEC)")
def _():
    def sc(t):
        r, k = t.r, t.k
        p = r.pipeline(transaction=True)
        p.set(k("{tx}:a"), "1").incr(k("{tx}:a")).incrby(k("{tx}:a"), 5).get(k("{tx}:a"))
        p.lpush(k("{tx}:l"), "x", "y").lrange(k("{tx}:l"), 0, -1)
        p.hset(k("{tx}:h"), "f", "v").hgetall(k("{tx}:h"))
        return p.execute()
    same(sc, [True, 2, 7, "7", 2, ["y", "x"], 1, {"f": "v"}])


@check("py: transaction with a runtime error inside")
def _():
    def sc(t):
        r, k = t.r, t.k
        r.set(k("{txe}:s"), "notanumber")
        p = r.pipeline(transaction=True)
        p.incr(k("{txe}:s")).set(k("{txe}:ok"), "1").get(k("{txe}:ok"))
        res = p.execute(raise_on_error=False)
        return [type(x).__name__ if isinstance(x, Exception) else x for x in res] + [str(res[0])]
    same(sc, ["ResponseError", True, "1", "value is not an integer or out of range"])


@check("py: transaction refused at queue time (EXECABORT)")
def _():
    def sc(t):
        r, k = t.r, t.k
        p = r.pipeline(transaction=True)
        p.set(k("{txa}:x"), "1")
        p.execute_command("SET", k("{txa}:y"))  # wrong number of arguments
        err = error_of(p.execute)
        err = err and (err[0], err[1].replace(t.prefix, ""))
        return [err, r.exists(k("{txa}:x")), r.ping()]
    # redis-py names the queued command that Redis refused (EXECABORT).
    same(sc, [("ResponseError", "Command # 2 (SET {txa}:y) of pipeline caused error: "
                                "wrong number of arguments for 'set' command"), 0, True])


@check("py: WATCH + optimistic transaction retry")
def _():
    def sc(t):
        r, k = t.r, t.k
        key = k("w:counter")
        r.set(key, 10)
        intruder = t.other()
        attempts = []

        def txn(pipe):
            value = int(pipe.get(key))
            attempts.append(value)
            if len(attempts) == 1:
                intruder.incr(key)  # another client changes the watched key
            pipe.multi()
            pipe.set(key, value + 1)
        res = r.transaction(txn, key)
        intruder.close()
        return [attempts, res, r.get(key)]
    same(sc, [[10, 11], [True], "12"])


@check("py: WATCH abort raises WatchError")
def _():
    def sc(t):
        r, k = t.r, t.k
        key = k("w2")
        r.set(key, "a")
        with r.pipeline() as pipe:
            pipe.watch(key)
            t.other().set(key, "b")
            pipe.multi()
            pipe.set(key, "c")
            err = error_of(pipe.execute)
        # UNWATCH path: watch, read, then give up; the connection stays usable.
        with r.pipeline() as pipe:
            pipe.watch(key)
            pipe.get(key)
            pipe.unwatch()
            pipe.reset()
        return [err[0] if err else None, r.get(key)]
    same(sc, ["WatchError", "b"])


# ---------------------------------------------------------------- pub/sub and blocking

def wait_message(ps, types, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = ps.get_message(timeout=0.2)
        if m and m["type"] in types:
            return m
    return None


@check("py: pub/sub subscribe, publish from another connection, receive")
def _():
    def sc(t):
        ch = t.k("chan")
        ps = t.r.pubsub()
        ps.subscribe(ch)
        sub = wait_message(ps, ("subscribe",))
        pub = t.other()
        numsub = pub.pubsub_numsub(ch)[0][1]
        n = pub.publish(ch, "hello")
        msg = wait_message(ps, ("message",))
        ps.psubscribe(t.k("pat*"))
        psub = wait_message(ps, ("psubscribe",))
        n2 = pub.publish(t.k("pattern-x"), "via pattern")
        pmsg = wait_message(ps, ("pmessage",))
        ps.unsubscribe(ch)
        uns = wait_message(ps, ("unsubscribe",))
        ps.punsubscribe()
        puns = wait_message(ps, ("punsubscribe",))
        after = pub.publish(ch, "nobody")
        ps.close()
        pub.close()
        strip = lambda s: s.replace(t.prefix, "") if isinstance(s, str) else s
        return [sub and (sub["channel"] == ch, sub["data"]), numsub, n,
                msg and (strip(msg["channel"]), msg["data"]),
                psub and psub["data"], n2,
                pmsg and (strip(pmsg["pattern"]), strip(pmsg["channel"]), pmsg["data"]),
                uns and uns["data"], puns and puns["data"], after]
    same(sc, [(True, 1), 1, 1, ("chan", "hello"), 2, 1,
              ("pat*", "pattern-x", "via pattern"), 1, 0, 0])


@check("py: pub/sub PING while subscribed")
def _():
    def sc(t):
        ps = t.r.pubsub()
        ps.subscribe(t.k("pingchan"))
        wait_message(ps, ("subscribe",))
        ps.ping("are you there")
        m = wait_message(ps, ("pong",), timeout=3)
        ps.close()
        return m and m["data"]
    same(sc, "are you there")


@check("py: BLPOP served by a push from another connection")
def _():
    def sc(t):
        key = t.k("bl:q")
        got = {}
        blocker = t.other()

        def run():
            try:
                got["v"] = blocker.blpop([key], timeout=4)
            except Exception as e:  # reported below
                got["e"] = repr(e)
        th = threading.Thread(target=run, daemon=True)
        th.start()
        time.sleep(0.3)  # let BLPOP reach the server; correctness does not depend on it
        pushed = t.r.rpush(key, "job-1")
        th.join(8)
        expect(not th.is_alive(), f"{t.label}: BLPOP still blocked after the push")
        expect("e" not in got, f"{t.label}: BLPOP raised {got.get('e')}")
        v = got["v"]
        blocker.close()
        return [pushed, v and (v[0].replace(t.prefix, ""), v[1]), t.r.llen(key)]
    same(sc, [1, ("bl:q", "job-1"), 0])


@check("py: BLPOP times out with nil")
def _():
    def sc(t):
        c = t.other()
        v = c.blpop([t.k("bl:empty")], timeout=1)
        after = c.ping()  # the connection is usable afterwards
        c.close()
        return [v, after]
    same(sc, [None, True])


def served_by_other(t, block, push):
    """Runs block(conn) on its own connection in a thread, then push(t) from
    another connection; returns (what block returned, what push returned)."""
    got = {}
    blocker = t.other()

    def run():
        try:
            got["v"] = block(blocker)
        except Exception as e:  # reported below
            got["e"] = repr(e)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    time.sleep(0.3)  # let the blocking call reach the server first
    pushed = push(t)
    th.join(8)
    expect(not th.is_alive(), f"{t.label}: blocking call still blocked after the push")
    expect("e" not in got, f"{t.label}: blocking call raised {got.get('e')}")
    blocker.close()
    return got["v"], pushed


@check("py: XREAD BLOCK served by XADD from another connection")
def _():
    def sc(t):
        s = t.k("xb")
        v, added = served_by_other(
            t, lambda c: c.xread({s: "$"}, block=4000),
            lambda t: t.r.xadd(s, {"event": "ping"}, id="5-1"))
        return [added, [(name.replace(t.prefix, ""), msgs) for name, msgs in v]]
    same(sc, ["5-1", [("xb", [("5-1", {"event": "ping"})])]])


@check("py: BZPOPMIN and BLMOVE served by another connection")
def _():
    def sc(t):
        z, src, dst = t.k("bz"), t.k("{bm}:src"), t.k("{bm}:dst")
        v1, _ = served_by_other(t, lambda c: c.bzpopmin([z], timeout=4),
                                lambda t: t.r.zadd(z, {"m": 1.5}))
        v2, _ = served_by_other(t, lambda c: c.blmove(src, dst, 4, "RIGHT", "LEFT"),
                                lambda t: t.r.rpush(src, "item"))
        return [v1 and (v1[0].replace(t.prefix, ""), v1[1], v1[2]), v2,
                t.r.lrange(dst, 0, -1)]
    same(sc, [("bz", "m", 1.5), "item", ["item"]])


@check("py: blocking pop inside a pipeline")
def _():
    def sc(t):
        r, k = t.r, t.k
        p = r.pipeline(transaction=False)
        p.rpush(k("bp"), "a", "b").blpop([k("bp")], timeout=1).set(k("bp:x"), "1")
        p.blpop([k("bp:none")], timeout=1).get(k("bp:x")).lrange(k("bp"), 0, -1)
        res = p.execute()
        res[1] = res[1] and (res[1][0].replace(t.prefix, ""), res[1][1])
        return res
    same(sc, [2, ("bp", "a"), True, None, "1", ["b"]])


@check("py: MULTI / DISCARD and nested MULTI error on one connection")
def _():
    def sc(t):
        conn = t.r.connection_pool.get_connection("MULTI")
        try:
            out = []
            for cmd in (("MULTI",), ("SET", t.k("md"), "1"), ("MULTI",), ("DISCARD",),
                        ("EXISTS", t.k("md")), ("EXEC",), ("DISCARD",)):
                conn.send_command(*cmd)
                try:
                    out.append(conn.read_response())
                except redis.exceptions.ResponseError as e:
                    out.append("ERR:" + str(e))
            return out
        finally:
            t.r.connection_pool.release(conn)
    same(sc, ["OK", "QUEUED", "ERR:MULTI calls can not be nested", "OK", 0,
              "ERR:EXEC without MULTI", "ERR:DISCARD without MULTI"])


# ---------------------------------------------------------------- connection state, errors, server

@check("py: client_setname / client_getname")
def _():
    def sc(t):
        r = t.other()
        before = r.client_getname()
        ok = r.client_setname("py-app-1")
        name = r.client_getname()
        bad = error_of(lambda: r.client_setname("has space"))
        still = r.client_getname()
        r.close()
        return [before, ok, name, bad, still]
    same(sc, [None, True, "py-app-1",
              ("ResponseError", "Client names cannot contain spaces, newlines or special characters."),
              "py-app-1"])


@check("py: error reply INCR on a non-integer raises ResponseError")
def _():
    def sc(t):
        r, k = t.r, t.k
        r.set(k("err:s"), "abc")
        err = error_of(lambda: r.incr(k("err:s")))
        return [err, r.get(k("err:s")), r.ping()]
    same(sc, [("ResponseError", "value is not an integer or out of range"), "abc", True])


@check("py: WRONGTYPE error")
def _():
    def sc(t):
        t.r.set(t.k("err:str"), "x")
        return [error_of(lambda: t.r.lpush(t.k("err:str"), "y")), t.r.ping()]
    same(sc, [("ResponseError", "WRONGTYPE Operation against a key holding the wrong kind of value"), True])


@check("py: wrong arity error")
def _():
    same(lambda t: error_of(lambda: t.r.execute_command("GET")),
         ("ResponseError", "wrong number of arguments for 'get' command"))


@check("py: unknown command error")
def _():
    def sc(t):
        return [error_of(lambda: t.r.execute_command("NOSUCHCOMMAND", "a1", "b2")),
                t.r.ping()]
    res = same(sc)
    expect(res[0] and res[0][0] == "ResponseError", f"got {res[0]!r}")


@check("py: info (forwarded)")
def _():
    d, p = DIRECT.r.info(), PROXY.r.info()
    for f in ("redis_version", "redis_mode", "os", "tcp_port"):
        expect(f in p, f"INFO through cellgate lacks {f}")
        if f == "tcp_port" and CLUSTER:
            # One section per master: the last one parsed names some master.
            expect(p[f] in INFO_PORTS, f"INFO tcp_port: cellgate {p[f]!r}, masters {INFO_PORTS}")
            continue
        expect(p[f] == d[f], f"INFO {f}: cellgate {p[f]!r}, Redis {d[f]!r}")
    # DBSIZE through cellgate: the one Redis, or the sum over the masters.
    direct = sum(client(port).dbsize() for port in NODE_PORTS)
    through = PROXY.r.dbsize()
    expect(through == direct, f"DBSIZE: cellgate {through}, Redis {direct}")
    srv = PROXY.r.info("server")
    expect("redis_version" in srv and "used_memory" not in srv,
           f"INFO server section: {sorted(srv)[:10]}")
    expect("used_memory" in PROXY.r.info("memory"), "INFO memory lacks used_memory")


@check("py: SCAN iteration over a few hundred keys")
def _():
    def sc(t):
        r = t.r
        p = r.pipeline(transaction=False)
        for i in range(300):
            p.set(t.k(f"scan:{i}"), i)
        for i in range(200):
            p.hset(t.k("scan-h"), f"f{i}", i)
            p.sadd(t.k("scan-s"), f"m{i}")
            p.zadd(t.k("scan-z"), {f"z{i}": i})
        p.execute()
        keys = [k.replace(t.prefix, "") for k in r.scan_iter(match=t.k("scan:*"), count=50)]
        hf = dict(r.hscan_iter(t.k("scan-h"), count=20))
        sm = list(r.sscan_iter(t.k("scan-s"), count=20))
        zm = dict(r.zscan_iter(t.k("scan-z"), count=20))
        return [len(keys), sorted(set(keys)) == sorted(f"scan:{i}" for i in range(300)),
                len(r.keys(t.k("scan:*"))), len(hf), hf.get("f7"), len(set(sm)),
                len(zm), zm.get("z9")]
    same(sc, [300, True, 300, 200, "7", 200, 200, 9.0])


@check("py: Lua EVAL / EVALSHA")
def _():
    def sc(t):
        r, k = t.r, t.k
        inc = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        return [r.eval("return {KEYS[1] == KEYS[1], ARGV[1], 7}", 1, k("lua"), "arg"),
                inc(keys=[k("lua:c")], args=[5]), inc(keys=[k("lua:c")], args=[5]),
                error_of(lambda: r.eval("return redis.call('NOPE')", 0)) is not None]
    same(sc, [[1, "arg", 7], 5, 10, True])


@check("py: many threads sharing one connection pool")
def _():
    def sc(t):
        r = t.other()
        key = t.k("{mt}:counter")
        errors = []

        def worker(n):
            try:
                for i in range(150):
                    r.incr(key)
                    mine = t.k(f"{{mt}}:{n}:{i}")
                    r.set(mine, f"{n}-{i}")
                    v = r.get(mine)
                    if v != f"{n}-{i}":
                        errors.append(f"thread {n} read {v!r} for {n}-{i}")
                        return
                    if i % 25 == 0:  # transactions interleaved with plain traffic
                        res = r.pipeline(transaction=True).incr(key).get(mine).execute()
                        if res[1] != f"{n}-{i}":
                            errors.append(f"thread {n}: MULTI/EXEC gave {res!r}")
                            return
            except Exception as e:
                errors.append(repr(e))
        ths = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(8)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(30)
        expect(not any(th.is_alive() for th in ths), f"{t.label}: worker threads stuck")
        expect(not errors, f"{t.label}: {errors[:3]}")
        v = r.get(key)
        r.close()
        return v
    same(sc, "1248")


# ---------------------------------------------------------------- connection life cycle

def raw_socket(port, timeout):
    """A client's socket to 127.0.0.1:port, TLS in the TLS modes."""
    s = socket.create_connection((HOST, port), timeout=timeout)
    if TLS_CA:
        import ssl
        s = ssl.create_default_context(cafile=TLS_CA).wrap_socket(s, server_hostname=HOST)
    return s


def raw_session(port, data, read_until=None, timeout=3.0):
    """Opens a plain socket, sends data, optionally reads until `read_until`
    appears, then closes the socket (the way a client that dies does)."""
    s = raw_socket(port, timeout)
    try:
        s.sendall(data)
        buf = b""
        if read_until is not None:
            end = time.monotonic() + timeout
            while read_until not in buf and time.monotonic() < end:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return buf
    finally:
        s.close()


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


@check("py: QUIT answers +OK, closes, and nothing after it runs")
def _():
    def sc(t):
        s = raw_socket(t.port, SOCK_TIMEOUT)
        s.sendall(resp("SET", t.k("quit"), "1") + resp("QUIT") + resp("SET", t.k("quit"), "2"))
        buf = b""
        while True:  # until the server closes the connection
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        s.close()
        c = t.other()
        v = c.get(t.k("quit"))
        c.close()
        return [buf, v]
    same(sc, [b"+OK\r\n+OK\r\n", "1"])


@check("py: client that disconnects during BLPOP does not swallow the next push")
def _():
    def sc(t):
        key = t.k("dc:bl")
        # A client blocks in BLPOP and goes away before anything is pushed.
        raw_session(t.port, resp("BLPOP", key, 3))
        time.sleep(0.5)
        pushed = t.r.rpush(key, "precious")
        time.sleep(0.2)
        return [pushed, t.r.lrange(key, 0, -1)]
    same(sc, [1, ["precious"]])


@check("py: subscriber that disconnects stops receiving (PUBLISH counts 0)")
def _():
    def sc(t):
        ch = t.k("dc:chan")
        raw_session(t.port, resp("SUBSCRIBE", ch), read_until=b":1\r\n")
        n = None
        for _ in range(20):  # the server notices the closed socket shortly after
            n = t.r.publish(ch, "anyone?")
            if n == 0:
                break
            time.sleep(0.1)
        return n
    same(sc, 0)


@check("py: client that disconnects inside MULTI leaves no open transaction behind")
def _():
    def sc(t):
        key = t.k("dc:multi")
        raw_session(t.port, resp("MULTI") + resp("SET", key, "from-dead-client"),
                    read_until=b"+QUEUED\r\n")
        time.sleep(0.2)
        # Fresh connections afterwards see plain replies, not QUEUED.
        out = []
        for _ in range(5):
            c = t.other()
            out.append([c.set(t.k("dc:after"), "1"), c.get(key), c.incr(t.k("dc:n")) > 0])
            c.close()
        return out
    same(sc, [[True, None, True]] * 5)


@check("py: client that disconnects after WATCH does not abort others' transactions")
def _():
    def sc(t):
        key = t.k("dc:watch")
        raw_session(t.port, resp("WATCH", key), read_until=b"+OK\r\n")
        t.r.set(key, "changed")  # would abort a transaction of the dead client
        res = []
        for _ in range(5):
            c = t.other()
            res.append(c.pipeline(transaction=True).set(key, "mine").get(key).execute())
            c.close()
        return res
    same(sc, [[True, "mine"]] * 5)


@check("py: CLIENT SETNAME is per connection")
def _():
    def sc(t):
        a, b = t.other(), t.other()
        a.client_setname("conn-a")
        res = [b.client_getname(), a.client_getname()]
        b.client_setname("conn-b")
        res += [a.client_getname(), b.client_getname()]
        a.close()
        b.close()
        return res
    same(sc, [None, "conn-a", "conn-a", "conn-b"])


@check("py: proxy-answered and forwarded commands interleaved in one pipeline")
def _():
    def sc(t):
        p = t.r.pipeline(transaction=False)
        for i in range(200):
            p.set(t.k(f"mix:{i}"), i).ping().get(t.k(f"mix:{i}")).echo(f"e{i}")
            p.execute_command("SELECT", 0).client_getname().incr(t.k("mix:n"))
        return p.execute()
    res = same(sc)
    for i in range(200):
        want = [True, True, str(i), f"e{i}", True, None, i + 1]
        expect(res[7 * i:7 * i + 7] == want, f"group {i}: {res[7 * i:7 * i + 7]!r}, wanted {want!r}")


@check("py: MULTI/EXEC sent as plain commands in one pipelined write")
def _():
    def sc(t):
        k = t.k("pm:a").encode()
        req = (resp("SET", k, "0") + resp("MULTI") + resp("INCR", k) + resp("PING")
               + resp("INCR", k) + resp("EXEC") + resp("GET", k))
        want_end = b"*3\r\n:1\r\n+PONG\r\n:2\r\n$1\r\n2\r\n"
        return raw_session(t.port, req, read_until=want_end)
    same(sc, b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
             b"*3\r\n:1\r\n+PONG\r\n:2\r\n$1\r\n2\r\n")


@check("py: 100 connections open at once")
def _():
    def sc(t):
        conns = [client(t.port) for _ in range(100)]
        for i, c in enumerate(conns):
            c.set(t.k(f"many:{i}"), i)
        vals = [c.get(t.k(f"many:{i}")) for i, c in enumerate(conns)]
        for c in conns:
            c.close()
        return vals == [str(i) for i in range(100)]
    same(sc, True)


@check("py: pipeline of 16 GETs of a 1 MiB value")
def _():
    def sc(t):
        val = os.urandom(1 << 20)
        t.b.set(t.k("bigpl"), val)
        p = t.b.pipeline(transaction=False)
        for _ in range(16):
            p.get(t.k("bigpl"))
        res = p.execute(raise_on_error=False)
        t.b.delete(t.k("bigpl"))
        return [len(res), sum(v == val for v in res),
                [str(v) for v in res if isinstance(v, Exception)][:1]]
    same(sc, [16, 16, []])


# A command that keeps Redis busy for ARGV[1] microseconds, then answers.
BUSY_LUA = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
  local n = redis.call('TIME')
until n[1] * 1000000 + n[2] - start >= tonumber(ARGV[1])
return 'done'
"""


@check("py: pipeline of 3000 commands of 0.5 ms each (replies keep streaming for 1.5 s)")
def _():
    # No single command comes near cellgate's 1 s upstream timeout and Redis
    # sends replies all the time (a batch of ~180 commands, ~90 ms, per 16 KB
    # it reads); the pipeline as a whole takes about 1.5 s, longer than the
    # timeout, which must count from the last reply, not from the send.
    # A bystander's small commands run on another connection meanwhile.
    def sc(t):
        sha = t.r.script_load(BUSY_LUA)
        bystander_errors = []
        done = threading.Event()

        def bystander():
            c = t.other()
            i = 0
            while not done.is_set() and i < 300:
                try:
                    c.set(t.k("bys"), i)
                    if c.get(t.k("bys")) != str(i):
                        bystander_errors.append(f"read back a wrong value for {i}")
                        break
                except redis.exceptions.RedisError as e:
                    bystander_errors.append(str(e))
                    break
                i += 1
                time.sleep(0.01)
            c.close()
        th = threading.Thread(target=bystander, daemon=True)
        th.start()
        p = t.other().pipeline(transaction=False)
        for _ in range(3000):
            p.evalsha(sha, 0, 500)
        res = p.execute(raise_on_error=False)
        done.set()
        th.join(10)
        errs = [str(v) for v in res if isinstance(v, Exception)]
        return [len(res), res.count("done"), errs[:1], len(errs), bystander_errors[:1]]
    same(sc, [3000, 3000, [], 0, []])


@check("py: Lock (SET NX PX and Lua release)")
def _():
    def sc(t):
        lock = t.r.lock(t.k("lock"), timeout=10, blocking_timeout=1)
        got = lock.acquire()
        other = t.other().lock(t.k("lock"), timeout=10, blocking_timeout=0.3)
        second = other.acquire()
        owned = lock.owned()
        lock.release()
        third = other.acquire()
        other.release()
        return [got, second, owned, third, t.r.exists(t.k("lock"))]
    same(sc, [True, False, True, True, 0])


# ---------------------------------------------------------------- LIMITER ADJUST

@check("py: an LLM gateway reserves an estimate with LIMITER CHECK and corrects it with LIMITER ADJUST")
def _():
    # A request reserves its estimated tokens, and once the model has
    # answered, the gateway charges or gives back actual - estimate. Each
    # reply is [limited, limit, remaining, retry_after, reset_after]; the
    # user's 1000 a day binds before the tenant's 10000.
    r = PROXY.r
    path = f"llm:t{os.getpid()}:alice"

    def call(*args):
        v = r.execute_command("LIMITER", *args)
        expect(isinstance(v, list) and len(v) == 5, f"LIMITER {args}: {short(v)}")
        return v[:3]

    expect(call("CHECK", path, "COST", 300) == [0, 1000, 700], "reserve 300")
    # The answer took 250: 50 back. The reply is PEEK COST 1's: 250 used.
    expect(call("ADJUST", path, -50) == [0, 1000, 749], "give back 50")
    expect(call("PEEK", path, "COST", 750) == [0, 1000, 0], "750 fit after 250")
    expect(call("CHECK", path, "COST", 500) == [0, 1000, 250], "reserve 500")
    # This one took 900: 400 more, past the day's 1000 (1150 used).
    expect(call("ADJUST", path, 400) == [1, 1000, 0], "charge 400 into debt")
    expect(call("CHECK", path, "COST", 1)[:1] == [1], "in debt: refused")
    # A cancelled request gives its whole reservation back, never beyond
    # fresh; the tenant's level moved with the user's.
    expect(call("ADJUST", path, -5000) == [0, 1000, 999], "give back all")
    other = f"llm:t{os.getpid()}:bob"
    expect(call("PEEK", other, "COST", 1000) == [0, 1000, 0], "bob's day")
    expect(call("ADJUST", other, 9500) == [1, 1000, 0], "bob past his day")
    # The tenant has 10000 - 9500 = 500 left: alice's 600 no longer fit.
    expect(call("PEEK", path, "COST", 600)[:1] == [1], "tenant level charged")
    expect(call("PEEK", path, "COST", 500) == [0, 10000, 0], "tenant's 500")
    # Bad input answers Redis's error text and writes nothing.
    err = error_of(lambda: r.execute_command("LIMITER", "ADJUST", path, "1.5"))
    expect(err == ("ResponseError", "value is not an integer or out of range"), f"{err}")


def main():
    global failed, passed
    only = sys.argv[1:]
    for name, fn in CHECKS:
        if only and not any(o in name for o in only):
            continue
        t0 = time.monotonic()
        try:
            fn()
            print(f"ok - {name}", flush=True)
            passed += 1
        except Fail as e:
            print(f"not ok - {name}: {e}", flush=True)
            failed += 1
        except Exception as e:
            tb = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]
            where = f" (line {tb[-1].lineno})" if tb else ""
            print(f"not ok - {name}: {type(e).__name__}: {e}{where}", flush=True)
            failed += 1
        if os.environ.get("CHECK_TIMES"):
            print(f"# {name}: {time.monotonic() - t0:.2f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
