// redigo (Debian golang-github-gomodule-redigo-dev) against cellgate,
// compared with the same calls straight against Redis. Connections are made
// as redigo's README shows, redis.Dial("tcp", addr), with default options
// (the comparison connections add only a read timeout, so a hang fails a
// check instead of the part).
//
// run.sh builds it offline in GOPATH mode from Debian's source package:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o go_clients go_clients.go
//	./go_clients [check name filter...]
//
// An error reply is a redis.Error value returned as the error of Do or
// Receive. Environment (run.sh sets it): PROXY_PORT, REDIS_PORT, CG_MODE,
// DIRECT_TAG (cluster mode: every direct key carries this hash tag and
// REDIS_PORT is the master that owns it), NODE_PORTS, CG_PID
// (upstream_conns.sh, found next to this file or in CLIENTS_DIR). Keys a
// command needs on one node share a hash tag in their name ({tx}, {l}, {s});
// the others spread over every master in cluster mode. Prints `ok - name` or
// `not ok - name: why` per check; exits 1 if any failed.
package main

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

const host = "127.0.0.1"
const tag = "redigo"
const checkTimeout = 15 * time.Second

var directTag = os.Getenv("DIRECT_TAG")

type fail string

type target struct {
	label  string
	addr   string
	prefix string
	c      redis.Conn
}

func dial(addr string) redis.Conn {
	c, err := redis.Dial("tcp", addr, redis.DialReadTimeout(5*time.Second), redis.DialConnectTimeout(5*time.Second))
	if err != nil {
		panic(fail(fmt.Sprintf("connect to %s: %v", addr, err)))
	}
	return c
}

func (t *target) k(name string) string  { return t.prefix + name }
func (t *target) strip(s string) string { return strings.ReplaceAll(s, t.prefix, "") }
func (t *target) other() redis.Conn     { return dial(t.addr) }

// do runs one command; an error reply becomes "error: <message>", so that
// the two sides compare.
func (t *target) do(c redis.Conn, cmd string, args ...interface{}) interface{} {
	v, err := c.Do(cmd, args...)
	if err != nil {
		if e, ok := err.(redis.Error); ok {
			return "error: " + string(e)
		}
		panic(fail(fmt.Sprintf("%s: %s: %v", t.label, cmd, err)))
	}
	return norm(v)
}

// norm makes replies comparable and printable: bulk strings as strings,
// arrays element by element, error replies as "error: ...".
func norm(v interface{}) interface{} {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = norm(e)
		}
		return out
	case redis.Error:
		return "error: " + string(x)
	}
	return v
}

func short(v interface{}) string {
	s := fmt.Sprintf("%q", v)
	if _, ok := v.(string); !ok {
		s = fmt.Sprintf("%#v", v)
	}
	if len(s) > 300 {
		s = s[:300] + fmt.Sprintf("...(%d chars)", len(s))
	}
	return s
}

func expect(cond bool, why string, a ...interface{}) {
	if !cond {
		panic(fail(fmt.Sprintf(why, a...)))
	}
}

var direct, proxy *target

// same runs the scenario against Redis, then through cellgate; they must
// agree, and equal the expected value when one is given.
func same(sc func(t *target) interface{}, expected ...interface{}) interface{} {
	d := sc(direct)
	p := sc(proxy)
	if len(expected) > 0 {
		expect(reflect.DeepEqual(d, expected[0]), "direct Redis gave %s, test expects %s (test bug?)", short(d), short(expected[0]))
	}
	expect(reflect.DeepEqual(p, d), "through cellgate %s, straight to Redis %s", short(p), short(d))
	return p
}

type check struct {
	name string
	fn   func()
}

var checks []check

func add(name string, fn func()) { checks = append(checks, check{tag + ": " + name, fn}) }

type L = []interface{}

func scriptDir() string {
	if d := os.Getenv("CLIENTS_DIR"); d != "" {
		return d
	}
	exe, _ := os.Executable()
	return filepath.Dir(exe)
}

func init() {
	add("20 clients with default options use only cellgate's shared upstream connections", func() {
		var conns []redis.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := 0; i < 20; i++ {
			c, err := redis.Dial("tcp", proxy.addr) // default options
			expect(err == nil, "client %d: connect: %v", i, err)
			conns = append(conns, c)
			_, err = c.Do("SET", proxy.k(fmt.Sprintf("cc:%d", i)), i)
			expect(err == nil, "client %d: SET: %v", i, err)
			v, err := redis.String(c.Do("GET", proxy.k(fmt.Sprintf("cc:%d", i))))
			expect(err == nil && v == fmt.Sprint(i), "client %d read back %q (%v)", i, v, err)
			_, err = c.Do("INCR", proxy.k("cc:n"))
			expect(err == nil, "client %d: INCR: %v", i, err)
		}
		out, err := exec.Command("bash", filepath.Join(scriptDir(), "upstream_conns.sh")).Output()
		line := strings.TrimSpace(string(out))
		fmt.Printf("# %s: cellgate's connections per Redis node, 20 redigo connections open: %s\n", tag, line)
		expect(err == nil, "too many connections from cellgate: %s", line)
	})

	add("ping and echo", func() {
		same(func(t *target) interface{} {
			return L{t.do(t.c, "PING"), t.do(t.c, "ECHO", "hello"), t.do(t.c, "ECHO", []byte{0, 13, 10, 255})}
		}, L{"PONG", "hello", "\x00\r\n\xff"})
	})

	add("strings (MSET/MGET over keys of many slots)", func() {
		same(func(t *target) interface{} {
			c := t.c
			return L{t.do(c, "SET", t.k("s"), "v1"), t.do(c, "GET", t.k("s")), t.do(c, "GET", t.k("missing")),
				t.do(c, "SET", t.k("s"), "x", "NX"), t.do(c, "APPEND", t.k("s"), "!"), t.do(c, "STRLEN", t.k("s")),
				t.do(c, "GETRANGE", t.k("s"), 0, 1), t.do(c, "MSET", t.k("m1"), "a", t.k("m2"), "", t.k("m3"), "c"),
				t.do(c, "MGET", t.k("m1"), t.k("m2"), t.k("m3"), t.k("nope")),
				t.do(c, "SETNX", t.k("n"), "1"), t.do(c, "SETNX", t.k("n"), "2"), t.do(c, "GET", t.k("n")),
				t.do(c, "EXISTS", t.k("m1"), t.k("m2"), t.k("nope")), t.do(c, "DEL", t.k("m1"), t.k("m2"), t.k("m3")),
				t.do(c, "TYPE", t.k("s"))}
		}, L{"OK", "v1", nil, nil, int64(3), int64(3), "v1", "OK", L{"a", "", "c", nil}, int64(1), int64(0), "1",
			int64(2), int64(3), "string"})
	})

	add("binary values", func() {
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		tricky := []byte("$5\r\nhello\r\n*2\r\n+OK\r\n-ERR x\r\n:1\r\n")
		big := make([]byte, 1<<20)
		rand.New(rand.NewSource(7)).Read(big)
		bkey := "b:\x00\r\n\xc8"
		same(func(t *target) interface{} {
			c := t.c
			for k, v := range map[string][]byte{"b:all": all, "b:tricky": tricky, "b:empty": {}, "b:big": big} {
				t.do(c, "SET", t.k(k), v)
			}
			t.do(c, "SET", t.k(bkey), "binkey")
			t.do(c, "HSET", t.k("b:h"), []byte{255, 0}, all)
			get := func(k string) []byte { b, _ := redis.Bytes(c.Do("GET", t.k(k))); return b }
			hv, _ := redis.Bytes(c.Do("HGET", t.k("b:h"), []byte{255, 0}))
			m, _ := redis.ByteSlices(c.Do("MGET", t.k("b:all"), t.k("b:tricky")))
			return L{bytes.Equal(get("b:all"), all), bytes.Equal(get("b:tricky"), tricky), t.do(c, "GET", t.k("b:empty")),
				bytes.Equal(get("b:big"), big), t.do(c, "STRLEN", t.k("b:big")), t.do(c, "GET", t.k(bkey)),
				bytes.Equal(hv, all), len(m) == 2 && bytes.Equal(m[0], all) && bytes.Equal(m[1], tricky)}
		}, L{true, true, "", true, int64(1 << 20), "binkey", true, true})
	})

	add("counters", func() {
		same(func(t *target) interface{} {
			c := t.c
			return L{t.do(c, "INCR", t.k("c")), t.do(c, "INCRBY", t.k("c"), 41), t.do(c, "DECR", t.k("c")),
				t.do(c, "DECRBY", t.k("c"), 2), t.do(c, "INCRBYFLOAT", t.k("f"), 1.5), t.do(c, "INCRBYFLOAT", t.k("f"), -0.25),
				t.do(c, "GET", t.k("c")), t.do(c, "INCRBY", t.k("neg"), int64(-9223372036854775807))}
		}, L{int64(1), int64(42), int64(41), int64(39), "1.5", "1.25", "39", int64(-9223372036854775807)})
	})

	add("hashes", func() {
		same(func(t *target) interface{} {
			c, h := t.c, t.k("h")
			first := L{t.do(c, "HSET", h, "f1", "1", "f2", "two", "f3", "3")}
			all, _ := redis.StringMap(c.Do("HGETALL", h))
			keys, _ := redis.Strings(c.Do("HKEYS", h))
			sort.Strings(keys)
			return append(first, t.do(c, "HGET", h, "f2"), t.do(c, "HGET", h, "nope"), all,
				t.do(c, "HINCRBY", h, "f1", 10), t.do(c, "HINCRBYFLOAT", h, "f3", 0.5), t.do(c, "HLEN", h),
				t.do(c, "HEXISTS", h, "f2"), t.do(c, "HDEL", h, "f2", "nope"), t.do(c, "HMGET", h, "f1", "nope", "f3"),
				keys, t.do(c, "HSETNX", h, "f1", "x"), t.do(c, "HGETALL", t.k("nohash")))
		}, L{int64(3), "two", nil, map[string]string{"f1": "1", "f2": "two", "f3": "3"}, int64(11), "3.5", int64(3),
			int64(1), int64(1), L{"11", nil, "3.5"}, []string{"f1", "f2", "f3"}, int64(0), L{}})
	})

	add("lists (RPOPLPUSH/LMOVE on one hash tag)", func() {
		same(func(t *target) interface{} {
			c, l := t.c, t.k("l")
			return L{t.do(c, "RPUSH", l, "a", "b", "c"), t.do(c, "LPUSH", l, "z"), t.do(c, "LRANGE", l, 0, -1),
				t.do(c, "LLEN", l), t.do(c, "LINDEX", l, 1), t.do(c, "LPOP", l), t.do(c, "RPOP", l),
				t.do(c, "LPOP", l, 5), t.do(c, "LPOP", l),
				t.do(c, "RPUSH", t.k("{l}2"), 1, 2, 3), t.do(c, "RPOPLPUSH", t.k("{l}2"), t.k("{l}3")),
				t.do(c, "LMOVE", t.k("{l}2"), t.k("{l}3"), "RIGHT", "LEFT"), t.do(c, "LRANGE", t.k("{l}2"), 0, -1),
				t.do(c, "LRANGE", t.k("{l}3"), 0, -1)}
		}, L{int64(3), int64(4), L{"z", "a", "b", "c"}, int64(4), "a", "z", "c", L{"a", "b"}, nil, int64(3), "3", "2",
			L{"1"}, L{"2", "3"}})
	})

	add("sets (SINTER/SUNION/SMOVE on one hash tag)", func() {
		same(func(t *target) interface{} {
			c, s, s2 := t.c, t.k("{s}"), t.k("{s}2")
			sorted := func(cmd string, args ...interface{}) []string {
				v, err := redis.Strings(c.Do(cmd, args...))
				expect(err == nil, "%s: %s: %v", t.label, cmd, err)
				sort.Strings(v)
				return v
			}
			return L{t.do(c, "SADD", s, "a", "b", "c"), sorted("SMEMBERS", s), t.do(c, "SISMEMBER", s, "b"),
				t.do(c, "SREM", s, "a"), t.do(c, "SADD", s2, "b", "d"), sorted("SINTER", s, s2), sorted("SUNION", s, s2),
				sorted("SDIFF", s, s2), t.do(c, "SMOVE", s, s2, "c"), sorted("SMEMBERS", s2), t.do(c, "SMEMBERS", t.k("noset"))}
		}, L{int64(3), []string{"a", "b", "c"}, int64(1), int64(1), int64(2), []string{"b"}, []string{"b", "c", "d"},
			[]string{"c"}, int64(1), []string{"b", "c", "d"}, L{}})
	})

	// ---------------------------------------------------------------- pipelines and transactions

	add("pipeline of 1000 commands (Send, Flush, Receive)", func() {
		res := same(func(t *target) interface{} {
			c := t.other()
			defer c.Close()
			for i := 0; i < 1000; i++ {
				switch i % 3 {
				case 0:
					c.Send("SET", t.k(fmt.Sprintf("pl:%d", i)), fmt.Sprintf("v%d", i))
				case 1:
					c.Send("GET", t.k(fmt.Sprintf("pl:%d", i-1)))
				default:
					c.Send("INCR", t.k("pl:n"))
				}
			}
			expect(c.Flush() == nil, "%s: flush", t.label)
			out := L{}
			for i := 0; i < 1000; i++ {
				v, err := c.Receive()
				if err != nil {
					v = "error: " + err.Error()
				}
				out = append(out, norm(v))
			}
			return out
		}).(L)
		for i, v := range res {
			var want interface{}
			switch i % 3 {
			case 0:
				want = "OK"
			case 1:
				want = fmt.Sprintf("v%d", i-1)
			default:
				want = int64((i + 1) / 3)
			}
			expect(reflect.DeepEqual(v, want), "reply %d is %s, wanted %s (replies out of order?)", i, short(v), short(want))
		}
	})

	add("multi/exec on one hash tag", func() {
		same(func(t *target) interface{} {
			c := t.other()
			defer c.Close()
			t.do(c, "SET", t.k("{tx}:s"), "x")
			c.Send("MULTI")
			c.Send("SET", t.k("{tx}:a"), "1")
			c.Send("INCR", t.k("{tx}:a"))
			c.Send("GET", t.k("{tx}:a"))
			c.Send("LPUSH", t.k("{tx}:l"), "x")
			ok := t.do(c, "EXEC")
			// A runtime error inside: its place holds the error, the rest runs.
			c.Send("MULTI")
			c.Send("INCR", t.k("{tx}:s"))
			c.Send("SET", t.k("{tx}:b"), "2")
			runtime := t.do(c, "EXEC")
			// Refused at queue time: EXECABORT, nothing runs (redigo's Do returns
			// the first error among the replies it reads: the refused SET's).
			c.Send("MULTI")
			c.Send("SET", t.k("{tx}:c"), "1")
			c.Send("SET", t.k("{tx}:d"))
			aborted := t.do(c, "EXEC")
			return L{ok, runtime, t.do(c, "GET", t.k("{tx}:b")), aborted, t.do(c, "EXISTS", t.k("{tx}:c"))}
		}, L{L{"OK", int64(2), "2", int64(1)}, L{"error: ERR value is not an integer or out of range", "OK"}, "2",
			"error: ERR wrong number of arguments for 'set' command", int64(0)})
	})

	add("WATCH + optimistic transaction retry", func() {
		same(func(t *target) interface{} {
			key := t.k("w:counter")
			t.do(t.c, "SET", key, 10)
			c, intruder := t.other(), t.other()
			defer c.Close()
			defer intruder.Close()
			var attempts []int
			for i := 0; i < 5; i++ {
				t.do(c, "WATCH", key)
				v, _ := redis.Int(c.Do("GET", key))
				attempts = append(attempts, v)
				if len(attempts) == 1 {
					t.do(intruder, "INCR", key)
				}
				c.Send("MULTI")
				c.Send("SET", key, v+1)
				if res := t.do(c, "EXEC"); res != nil {
					break
				}
			}
			return L{attempts, t.do(t.c, "GET", key)}
		}, L{[]int{10, 11}, "12"})
	})

	// ---------------------------------------------------------------- pub/sub and blocking

	add("pub/sub subscribe, publish from another connection, receive", func() {
		same(func(t *target) interface{} {
			psc := redis.PubSubConn{Conn: t.other()}
			defer psc.Close()
			pub := t.other()
			defer pub.Close()
			var got L
			next := func() interface{} {
				switch m := psc.Receive().(type) {
				case redis.Message:
					return L{"message", t.strip(m.Pattern), t.strip(m.Channel), string(m.Data)}
				case redis.Subscription:
					return L{m.Kind, t.strip(m.Channel), m.Count}
				case error:
					return "error: " + m.Error()
				default:
					return fmt.Sprintf("%T", m)
				}
			}
			psc.Subscribe(t.k("chan"))
			got = append(got, next())
			n := t.do(pub, "PUBLISH", t.k("chan"), "hello")
			got = append(got, next())
			psc.PSubscribe(t.k("pat*"))
			got = append(got, next())
			pn := t.do(pub, "PUBLISH", t.k("pat-1"), []byte{0, 1})
			got = append(got, next())
			numsub := t.do(pub, "PUBSUB", "NUMSUB", t.k("chan"))
			psc.Unsubscribe(t.k("chan"))
			got = append(got, next())
			psc.PUnsubscribe()
			got = append(got, next())
			after := t.do(pub, "PUBLISH", t.k("chan"), "nobody")
			if ns, ok := numsub.(L); ok && len(ns) == 2 {
				numsub = ns[1]
			}
			return L{n, pn, numsub, after, got}
		}, L{int64(1), int64(1), int64(1), int64(0), L{L{"subscribe", "chan", 1}, L{"message", "", "chan", "hello"},
			L{"psubscribe", "pat*", 2}, L{"message", "pat*", "pat-1", "\x00\x01"}, L{"unsubscribe", "chan", 1},
			L{"punsubscribe", "pat*", 0}}})
	})

	add("BLPOP served by a push from another connection", func() {
		same(func(t *target) interface{} {
			key := t.k("bl:q")
			blocker := t.other()
			defer blocker.Close()
			res := make(chan interface{}, 1)
			go func() { res <- t.do(blocker, "BLPOP", key, 4) }()
			time.Sleep(300 * time.Millisecond) // let BLPOP reach the server first
			pushed := t.do(t.c, "RPUSH", key, "job-1")
			var v interface{}
			select {
			case v = <-res:
			case <-time.After(6 * time.Second):
				panic(fail(t.label + ": BLPOP still blocked after the push"))
			}
			if p, ok := v.(L); ok && len(p) == 2 {
				v = L{t.strip(p[0].(string)), p[1]}
			}
			return L{pushed, v, t.do(blocker, "BLPOP", t.k("bl:empty"), 1)}
		}, L{int64(1), L{"bl:q", "job-1"}, nil})
	})

	// ---------------------------------------------------------------- errors, scripts, scan

	add("error replies are redis.Error", func() {
		same(func(t *target) interface{} {
			c := t.c
			t.do(c, "SET", t.k("err"), "abc")
			errOf := func(cmd string, args ...interface{}) interface{} {
				_, err := c.Do(cmd, args...)
				if e, ok := err.(redis.Error); ok {
					return L{"redis.Error", string(e)}
				}
				return fmt.Sprintf("%T %v", err, err)
			}
			unknown := errOf("NOSUCHCOMMAND", "a")
			return L{errOf("INCR", t.k("err")), errOf("LPUSH", t.k("err"), "x"), unknown.(L)[0],
				t.do(c, "GET", t.k("err")), t.do(c, "PING")}
		}, L{L{"redis.Error", "ERR value is not an integer or out of range"},
			L{"redis.Error", "WRONGTYPE Operation against a key holding the wrong kind of value"}, "redis.Error", "abc", "PONG"})
	})

	add("Lua via redis.NewScript (EVALSHA with EVAL fallback)", func() {
		same(func(t *target) interface{} {
			s := redis.NewScript(1, "return redis.call('INCRBY', KEYS[1], ARGV[1])")
			one, err1 := s.Do(t.c, t.k("lua:c"), 5)
			two, err2 := s.Do(t.c, t.k("lua:c"), 5)
			expect(err1 == nil && err2 == nil, "%s: script: %v %v", t.label, err1, err2)
			return L{t.do(t.c, "EVAL", "return {KEYS[1] == KEYS[1], ARGV[1], 7}", 1, t.k("lua"), "arg"), one, two}
		}, L{L{int64(1), "arg", int64(7)}, int64(5), int64(10)})
	})

	add("SCAN over a few hundred keys", func() {
		same(func(t *target) interface{} {
			c := t.other()
			defer c.Close()
			for i := 0; i < 300; i++ {
				c.Send("SET", t.k(fmt.Sprintf("scan:%d", i)), i)
			}
			c.Flush()
			for i := 0; i < 300; i++ {
				c.Receive()
			}
			seen := map[string]bool{}
			cursor := "0"
			for {
				v, err := redis.Values(c.Do("SCAN", cursor, "MATCH", t.k("scan:*"), "COUNT", 50))
				expect(err == nil, "%s: SCAN: %v", t.label, err)
				keys, _ := redis.Strings(v[1], nil)
				for _, k := range keys {
					seen[t.strip(k)] = true
				}
				cursor, _ = redis.String(v[0], nil)
				if cursor == "0" {
					break
				}
			}
			ok := len(seen) == 300
			for i := 0; i < 300; i++ {
				ok = ok && seen[fmt.Sprintf("scan:%d", i)]
			}
			return L{len(seen), ok}
		}, L{300, true})
	})
}

func run(c check) (why string) {
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(fail); ok {
					done <- string(f)
				} else {
					done <- fmt.Sprintf("panic: %v", r)
				}
			}
		}()
		c.fn()
		done <- ""
	}()
	select {
	case why = <-done:
	case <-time.After(checkTimeout):
		why = fmt.Sprintf("timed out after %v", checkTimeout)
	}
	return why
}

func main() {
	proxyAddr := host + ":" + os.Getenv("PROXY_PORT")
	redisAddr := host + ":" + os.Getenv("REDIS_PORT")
	failed := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Printf("not ok - %s: setup: %v\n", tag, r)
				os.Exit(1)
			}
		}()
		direct = &target{"redis", redisAddr, directTag + "go:d:", dial(redisAddr)}
		proxy = &target{"cellgate", proxyAddr, "go:p:", dial(proxyAddr)}
	}()
	only := os.Args[1:]
	for _, c := range checks {
		if len(only) > 0 {
			match := false
			for _, o := range only {
				match = match || strings.Contains(c.name, o)
			}
			if !match {
				continue
			}
		}
		if why := run(c); why == "" {
			fmt.Printf("ok - %s\n", c.name)
		} else {
			failed++
			fmt.Printf("not ok - %s: %s\n", c.name, strings.NewReplacer("\r", " ", "\n", " ").Replace(why))
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
