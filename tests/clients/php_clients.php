<?php
// phpredis (Debian php-redis, the C extension) against cellgate, compared
// with the same calls straight against Redis. Clients are made as phpredis's
// README shows: `$redis = new Redis(); $redis->connect($host, $port);`,
// default options.
//
//   php php_clients.php [check name filter...]
//
// phpredis does not raise on an error reply: the command returns false and
// getLastError() holds Redis's message (RedisException is for connection
// trouble). Blocking calls (SUBSCRIBE, BLPOP) block the process, so the
// other side (PUBLISH, RPUSH) runs in a helper process of this same script
// (`php php_clients.php --helper ...`), on its own phpredis connection.
//
// Environment (run.sh sets it): PROXY_PORT, REDIS_PORT, CG_MODE, DIRECT_TAG
// (cluster mode: every direct key carries this hash tag and REDIS_PORT is
// the master that owns it), NODE_PORTS, CG_PID (upstream_conns.sh). Keys a
// command needs on one node share a hash tag in their name ({tx}, {l}, {s});
// the others spread over every master in cluster mode. Prints `ok - name`
// or `not ok - name: why` per check; exits 1 if any failed.

const HOST = '127.0.0.1';
const TAG = 'phpredis';

function connect_to(int $port): Redis
{
    $r = new Redis();
    $r->connect(HOST, $port);
    return $r;
}

// Helper mode: `--helper publish|rpush PORT KEY HEX_VALUE DELAY_MS` waits,
// runs the command on its own connection and prints the reply.
if (($argv[1] ?? '') === '--helper') {
    [, , $verb, $port, $key, $value, $delay] = $argv;
    $value = hex2bin($value);
    usleep((int)$delay * 1000);
    $r = connect_to((int)$port);
    echo $verb === 'publish' ? $r->publish($key, $value) : $r->rPush($key, $value), "\n";
    exit(0);
}

// Starts a helper; returns a function that waits for it and returns its output.
function helper(string $verb, int $port, string $key, string $value, int $delayMs): callable
{
    $p = proc_open([PHP_BINARY, __FILE__, '--helper', $verb, (string)$port, $key, bin2hex($value), (string)$delayMs],
        [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    return function () use ($p, $pipes) {
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        proc_close($p);
        return trim($out) . ($err !== '' ? " (stderr: " . trim($err) . ")" : '');
    };
}

define('PROXY_PORT', (int)getenv('PROXY_PORT'));
define('REDIS_PORT', (int)getenv('REDIS_PORT'));
define('DIRECT_TAG', (string)getenv('DIRECT_TAG'));

class Fail extends Exception {}

final class Target
{
    public Redis $r;

    public function __construct(public string $label, public int $port, public string $prefix)
    {
        $this->r = connect_to($port);
    }

    public function k(string $name): string
    {
        return $this->prefix . $name;
    }

    public function strip($s)
    {
        return is_string($s) ? str_replace($this->prefix, '', $s) : $s;
    }

    public function other(): Redis
    {
        return connect_to($this->port);
    }
}

$DIRECT = new Target('redis', REDIS_PORT, DIRECT_TAG . 'php:d:');
$PROXY = new Target('cellgate', PROXY_PORT, 'php:p:');

function expect(bool $cond, string $why): void
{
    if (!$cond) {
        throw new Fail($why);
    }
}

function short($v, int $n = 300): string
{
    $s = json_encode($v, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES);
    return strlen($s) <= $n ? $s : substr($s, 0, $n) . '...(' . strlen($s) . ' chars)';
}

const NONE = "\0none";
// Runs the scenario against Redis, then through cellgate; they must agree,
// and equal $expected when given. Returns the proxy's result.
function same(callable $sc, $expected = NONE)
{
    global $DIRECT, $PROXY;
    $d = $sc($DIRECT);
    $p = $sc($PROXY);
    if ($expected !== NONE) {
        expect($d === $expected, "direct Redis gave " . short($d) . ", test expects " . short($expected) . " (test bug?)");
    }
    expect($p === $d, "through cellgate " . short($p) . ", straight to Redis " . short($d));
    return $p;
}

// An error reply, the phpredis way: false, and the message in getLastError().
function error_of(Redis $r, callable $fn)
{
    $r->clearLastError();
    $res = $fn();
    return [$res, $r->getLastError() === null ? null : rtrim($r->getLastError())];
}

$CHECKS = [];
function check(string $name, callable $fn): void
{
    global $CHECKS;
    $CHECKS[] = [TAG . ": $name", $fn];
}

// ---------------------------------------------------------------- connection count

check("20 clients with default options use only cellgate's shared upstream connections", function () use ($PROXY) {
    $clients = [];
    for ($i = 0; $i < 20; $i++) {
        $c = new Redis();                     // default options
        $c->connect(HOST, PROXY_PORT);
        $c->set($PROXY->k("cc:$i"), (string)$i);
        expect($c->get($PROXY->k("cc:$i")) === (string)$i, "client $i read back a wrong value");
        $c->incr($PROXY->k('cc:n'));
        $clients[] = $c;
    }
    exec('bash ' . escapeshellarg(__DIR__ . '/upstream_conns.sh'), $out, $rc);
    $line = trim(implode(' ', $out));
    echo "# " . TAG . ": cellgate's connections per Redis node, 20 phpredis clients open: $line\n";
    foreach ($clients as $c) {
        $c->close();
    }
    expect($rc === 0, "too many connections from cellgate: $line");
});

// ---------------------------------------------------------------- data types

check('ping and echo', function () {
    same(fn($t) => [$t->r->ping(), $t->r->echo('hello'), $t->r->echo("\x00\r\n\xff")],
        [true, 'hello', "\x00\r\n\xff"]);
});

check('strings (MSET/MGET over keys of many slots)', function () {
    same(function ($t) {
        $r = $t->r;
        return [$r->set($t->k('s'), 'v1'), $r->get($t->k('s')), $r->get($t->k('missing')),
            $r->set($t->k('s'), 'x', ['nx']), $r->append($t->k('s'), '!'), $r->strlen($t->k('s')),
            $r->getRange($t->k('s'), 0, 1),
            $r->mSet([$t->k('m1') => 'a', $t->k('m2') => '', $t->k('m3') => 'c']),
            $r->mGet([$t->k('m1'), $t->k('m2'), $t->k('m3'), $t->k('nope')]),
            $r->setNx($t->k('n'), '1'), $r->setNx($t->k('n'), '2'), $r->get($t->k('n')),
            $r->exists($t->k('m1'), $t->k('m2'), $t->k('nope')), $r->del($t->k('m1'), $t->k('m2'), $t->k('m3')),
            $r->type($t->k('s')) === Redis::REDIS_STRING];
    }, [true, 'v1', false, false, 3, 3, 'v1', true, ['a', '', 'c', false], true, false, '1', 2, 3, true]);
});

check('binary values', function () {
    $all = implode('', array_map('chr', range(0, 255)));
    $tricky = "\$5\r\nhello\r\n*2\r\n+OK\r\n-ERR x\r\n:1\r\n";
    mt_srand(7);
    $big = '';
    for ($i = 0; $i < (1 << 20) / 4; $i++) {
        $big .= pack('N', mt_rand());
    }
    $bkey = "b:\x00\r\n\xc8";
    same(function ($t) use ($all, $tricky, $big, $bkey) {
        $r = $t->r;
        $r->set($t->k('b:all'), $all);
        $r->set($t->k('b:tricky'), $tricky);
        $r->set($t->k('b:empty'), '');
        $r->set($t->k('b:big'), $big);
        $r->set($t->k($bkey), 'binkey');
        $r->hSet($t->k('b:h'), "\xff\x00", $all);
        return [$r->get($t->k('b:all')) === $all, $r->get($t->k('b:tricky')) === $tricky,
            $r->get($t->k('b:empty')), $r->get($t->k('b:big')) === $big, $r->strlen($t->k('b:big')),
            $r->get($t->k($bkey)), $r->hGet($t->k('b:h'), "\xff\x00") === $all,
            $r->mGet([$t->k('b:all'), $t->k('b:tricky')]) === [$all, $tricky]];
    }, [true, true, '', true, 1 << 20, 'binkey', true, true]);
});

check('counters', function () {
    same(function ($t) {
        $r = $t->r;
        return [$r->incr($t->k('c')), $r->incrBy($t->k('c'), 41), $r->decr($t->k('c')), $r->decrBy($t->k('c'), 2),
            $r->incrByFloat($t->k('f'), 1.5), $r->incrByFloat($t->k('f'), -0.25), $r->get($t->k('c')),
            $r->incrBy($t->k('neg'), -9223372036854775807)];
    }, [1, 42, 41, 39, 1.5, 1.25, '39', -9223372036854775807]);
});

check('hashes', function () {
    same(function ($t) {
        $r = $t->r;
        $h = $t->k('h');
        $sortedKeys = function () use ($r, $h) { $k = $r->hKeys($h); sort($k); return $k; };
        return [$r->hMSet($h, ['f1' => '1', 'f2' => 'two', 'f3' => '3']), $r->hGet($h, 'f2'), $r->hGet($h, 'nope'),
            $r->hGetAll($h), $r->hIncrBy($h, 'f1', 10), $r->hIncrByFloat($h, 'f3', 0.5), $r->hLen($h),
            $r->hExists($h, 'f2'), $r->hDel($h, 'f2', 'nope'), $r->hMGet($h, ['f1', 'nope', 'f3']),
            $r->hSetNx($h, 'f1', 'x'), $r->hGetAll($t->k('nohash')), $sortedKeys()];
    }, [true, 'two', false, ['f1' => '1', 'f2' => 'two', 'f3' => '3'], 11, 3.5, 3, true, 1,
        ['f1' => '11', 'nope' => false, 'f3' => '3.5'], false, [], ['f1', 'f3']]);
});

check('lists (RPOPLPUSH/LMOVE on one hash tag)', function () {
    same(function ($t) {
        $r = $t->r;
        $l = $t->k('l');
        return [$r->rPush($l, 'a', 'b', 'c'), $r->lPush($l, 'z'), $r->lRange($l, 0, -1), $r->lLen($l),
            $r->lIndex($l, 1), $r->lPop($l), $r->rPop($l), $r->lPop($l), $r->lPop($l), $r->lPop($l),
            $r->rPush($t->k('{l}2'), '1', '2', '3'), $r->rpoplpush($t->k('{l}2'), $t->k('{l}3')),
            $r->rawCommand('LMOVE', $t->k('{l}2'), $t->k('{l}3'), 'RIGHT', 'LEFT'), // no lMove() in 5.3
            $r->lRange($t->k('{l}2'), 0, -1),
            $r->lRange($t->k('{l}3'), 0, -1)];
    }, [3, 4, ['z', 'a', 'b', 'c'], 4, 'a', 'z', 'c', 'a', 'b', false, 3, '3', '2', ['1'], ['2', '3']]);
});

check('sets (SINTER/SUNION/SMOVE on one hash tag)', function () {
    same(function ($t) {
        $r = $t->r;
        $s = $t->k('{s}');
        $s2 = $t->k('{s}2');
        $sorted = function ($a) { sort($a); return $a; };
        return [$r->sAdd($s, 'a', 'b', 'c'), $sorted($r->sMembers($s)), $r->sIsMember($s, 'b'),
            $r->sIsMember($s, 'x'), $r->sRem($s, 'a'), $r->sAdd($s2, 'b', 'd'), $sorted($r->sInter($s, $s2)),
            $sorted($r->sUnion($s, $s2)), $sorted($r->sDiff($s, $s2)), $r->sMove($s, $s2, 'c'),
            $sorted($r->sMembers($s2)), $r->sMembers($t->k('noset'))];
    }, [3, ['a', 'b', 'c'], true, false, 1, 2, ['b'], ['b', 'c', 'd'], ['c'], true, ['b', 'c', 'd'], []]);
});

check('sorted sets', function () {
    same(function ($t) {
        $r = $t->r;
        $z = $t->k('z');
        return [$r->zAdd($z, 1, 'a', 2.5, 'b', -3, 'c'), $r->zRange($z, 0, -1, true), $r->zScore($z, 'b'),
            $r->zIncrBy($z, 2, 'a'), $r->zRank($z, 'a'), $r->zRangeByScore($z, '(0', '+inf'), $r->zCard($z),
            $r->zPopMin($z), $r->zRem($z, 'a', 'nope')];
    }, [3, ['c' => -3.0, 'a' => 1.0, 'b' => 2.5], 2.5, 3.0, 2, ['b', 'a'], 3, ['c' => -3.0], 1]);
});

check('expiry', function () {
    same(function ($t) {
        $r = $t->r;
        $r->set($t->k('e'), 'v', ['ex' => 100]);
        $ttl = $r->ttl($t->k('e'));
        $r->pExpire($t->k('e'), 50000);
        $pttl = $r->pttl($t->k('e'));
        $per = $r->persist($t->k('e'));
        $r->set($t->k('short'), 'v', ['px' => 60]);
        usleep(300000);
        return [$ttl > 0 && $ttl <= 100, $pttl > 40000 && $pttl <= 50000, $per, $r->ttl($t->k('e')),
            $r->get($t->k('short')), $r->ttl($t->k('nope'))];
    }, [true, true, true, -1, false, -2]);
});

// ---------------------------------------------------------------- pipelines and transactions

check('pipeline of 1000 commands', function () {
    $res = same(function ($t) {
        $p = $t->r->pipeline();
        for ($i = 0; $i < 1000; $i++) {
            if ($i % 3 === 0) {
                $p->set($t->k("pl:$i"), "v$i");
            } elseif ($i % 3 === 1) {
                $p->get($t->k('pl:' . ($i - 1)));
            } else {
                $p->incr($t->k('pl:n'));
            }
        }
        return $p->exec();
    });
    for ($i = 0; $i < 1000; $i++) {
        $want = $i % 3 === 0 ? true : ($i % 3 === 1 ? 'v' . ($i - 1) : intdiv($i + 1, 3));
        expect($res[$i] === $want, "reply $i is " . short($res[$i]) . ", wanted " . short($want) . " (replies out of order?)");
    }
});

check('multi/exec on one hash tag', function () {
    same(function ($t) {
        $r = $t->r;
        $r->set($t->k('{tx}:s'), 'x');
        $ok = $r->multi()->set($t->k('{tx}:a'), '1')->incr($t->k('{tx}:a'))->get($t->k('{tx}:a'))
            ->lPush($t->k('{tx}:l'), 'x')->lRange($t->k('{tx}:l'), 0, -1)->exec();
        // A runtime error inside: false in its place, the rest runs.
        $runtime = $r->multi()->incr($t->k('{tx}:s'))->set($t->k('{tx}:b'), '2')->exec();
        // DISCARD: nothing runs.
        $r->multi()->set($t->k('{tx}:c'), '1');
        $discarded = $r->discard();
        return [$ok, $runtime, $r->get($t->k('{tx}:b')), $discarded, $r->exists($t->k('{tx}:c'))];
    }, [[true, 2, '2', 1, ['x']], [false, true], '2', true, 0]);
});

check('WATCH + optimistic transaction retry', function () {
    same(function ($t) {
        $key = $t->k('w:counter');
        $t->r->set($key, '10');
        $r = $t->other();
        $intruder = $t->other();
        $attempts = [];
        for ($i = 0; $i < 5; $i++) {
            $r->watch($key);
            $v = (int)$r->get($key);
            $attempts[] = $v;
            if (count($attempts) === 1) {
                $intruder->incr($key);
            }
            $res = $r->multi()->set($key, (string)($v + 1))->exec();
            if ($res !== false) {
                break;
            }
        }
        $r->close();
        $intruder->close();
        return [$attempts, $t->r->get($key)];
    }, [[10, 11], '12']);
});

// ---------------------------------------------------------------- pub/sub and blocking

// phpredis's subscribe loop only ends when the connection does: the
// callback records the message and closes the connection.
function receive_one(Redis $sub, string $how, string $what): array
{
    $got = null;
    try {
        if ($how === 'subscribe') {
            $sub->subscribe([$what], function ($redis, $chan, $msg) use (&$got) {
                $got = [$chan, $msg];
                $redis->close();
            });
        } else {
            $sub->psubscribe([$what], function ($redis, $pat, $chan, $msg) use (&$got) {
                $got = [$pat, $chan, $msg];
                $redis->close();
            });
        }
    } catch (RedisException $e) {
        if ($got === null) {
            return ['error', $e->getMessage()];
        }
    }
    return $got;
}

check('pub/sub subscribe, publish from another connection, receive', function () {
    same(function ($t) {
        $sub = $t->other();
        $sub->setOption(Redis::OPT_READ_TIMEOUT, 5); // a lost message fails, not hangs
        $wait = helper('publish', $t->port, $t->k('chan'), 'hello', 300);
        $msg = receive_one($sub, 'subscribe', $t->k('chan'));
        $n = $wait();
        $sub = $t->other();
        $sub->setOption(Redis::OPT_READ_TIMEOUT, 5);
        $wait = helper('publish', $t->port, $t->k('pat-1'), "\x00\x01", 300);
        $pmsg = receive_one($sub, 'psubscribe', $t->k('pat*'));
        $pn = $wait();
        usleep(100000); // the closed subscriber is gone
        $after = $t->r->publish($t->k('chan'), 'nobody');
        return [array_map([$t, 'strip'], $msg), $n, array_map([$t, 'strip'], $pmsg), $pn, $after];
    }, [['chan', 'hello'], '1', ['pat*', 'pat-1', "\x00\x01"], '1', 0]);
});

check('BLPOP served by a push from another connection', function () {
    same(function ($t) {
        $blocker = $t->other();
        $key = $t->k('bl:q');
        $wait = helper('rpush', $t->port, $key, 'job-1', 300);
        $v = $blocker->blPop([$key], 4);
        $pushed = $wait();
        $timedOut = $blocker->blPop([$t->k('bl:empty')], 1);
        $blocker->close();
        return [$pushed, is_array($v) ? array_map([$t, 'strip'], $v) : $v, $timedOut, $t->r->lLen($key)];
    }, ['1', ['bl:q', 'job-1'], [], 0]);
});

// ---------------------------------------------------------------- errors, scripts, scan

check('error replies: false and getLastError()', function () {
    same(function ($t) {
        $r = $t->r;
        $r->set($t->k('err'), 'abc');
        $unknown = error_of($r, fn() => $r->rawCommand('NOSUCHCOMMAND', 'a'));
        return [error_of($r, fn() => $r->incr($t->k('err'))), error_of($r, fn() => $r->lPush($t->k('err'), 'x')),
            $unknown[0], $unknown[1] !== null, $r->get($t->k('err')), $r->ping()];
    }, [[false, 'ERR value is not an integer or out of range'],
        [false, 'WRONGTYPE Operation against a key holding the wrong kind of value'], false, true, 'abc', true]);
});

check('Lua EVAL / EVALSHA', function () {
    same(function ($t) {
        $r = $t->r;
        $sha = $r->script('load', "return redis.call('INCRBY', KEYS[1], ARGV[1])");
        return [$r->eval('return {KEYS[1] == KEYS[1], ARGV[1], 7}', [$t->k('lua'), 'arg'], 1),
            $r->evalSha($sha, [$t->k('lua:c'), '5'], 1), $r->evalSha($sha, [$t->k('lua:c'), '5'], 1)];
    }, [[1, 'arg', 7], 5, 10]);
});

check('SCAN over a few hundred keys', function () {
    same(function ($t) {
        $r = $t->r;
        $p = $r->pipeline();
        for ($i = 0; $i < 300; $i++) {
            $p->set($t->k("scan:$i"), (string)$i);
        }
        $p->exec();
        $r->setOption(Redis::OPT_SCAN, Redis::SCAN_RETRY);
        $keys = [];
        $it = null;
        while (($batch = $r->scan($it, $t->k('scan:*'), 50)) !== false) {
            foreach ($batch as $k) {
                $keys[$t->strip($k)] = true;
            }
        }
        $r->setOption(Redis::OPT_SCAN, Redis::SCAN_NORETRY);
        $names = array_keys($keys);
        sort($names);
        $want = array_map(fn($i) => "scan:$i", range(0, 299));
        sort($want);
        return [count($names), $names === $want];
    }, [300, true]);
});

// ---------------------------------------------------------------- main

$only = array_slice($argv, 1);
$failed = 0;
foreach ($CHECKS as [$name, $fn]) {
    if ($only && !array_filter($only, fn($o) => str_contains($name, $o))) {
        continue;
    }
    try {
        $fn();
        echo "ok - $name\n";
    } catch (Fail $e) {
        $failed++;
        echo "not ok - $name: " . $e->getMessage() . "\n";
    } catch (Throwable $e) {
        $failed++;
        echo "not ok - $name: " . get_class($e) . ': ' . str_replace(["\r", "\n"], ' ', $e->getMessage())
            . ' (line ' . $e->getLine() . ")\n";
    }
    flush();
}
exit($failed ? 1 : 0);
