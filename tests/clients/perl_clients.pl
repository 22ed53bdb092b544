#!/usr/bin/perl
# Perl's Redis (Debian libredis-perl) against cellgate, compared with the same
# calls straight against Redis. Clients are made as its documentation shows,
# Redis->new(server => 'host:port'), default options.
#
#   perl perl_clients.pl [check name filter...]
#
# An error reply dies with "[command] message, at ..."; pipelining is the
# callback form (a callback per command, then wait_all_responses); pub/sub is
# subscribe + wait_for_messages. BLPOP blocks the process, so the push comes
# from a forked child on its own connection.
#
# Environment (run.sh sets it): PROXY_PORT, REDIS_PORT, CG_MODE, DIRECT_TAG
# (cluster mode: every direct key carries this hash tag and REDIS_PORT is the
# master that owns it), NODE_PORTS, CG_PID (upstream_conns.sh). Keys a command
# needs on one node share a hash tag in their name ({tx}, {l}, {s}); the
# others spread over every master in cluster mode. Prints `ok - name` or
# `not ok - name: why` per check; exits 1 if any failed.
use strict;
use warnings;
use Redis;
use POSIX ();
use Time::HiRes qw(sleep);
use File::Basename qw(dirname);
use Data::Dumper;

$| = 1;
my $HOST = '127.0.0.1';
my $TAG = 'perl-redis';
my $PROXY_PORT = $ENV{PROXY_PORT} or die "PROXY_PORT\n";
my $REDIS_PORT = $ENV{REDIS_PORT} or die "REDIS_PORT\n";
my $DIRECT_TAG = $ENV{DIRECT_TAG} // '';
my $HERE = dirname(__FILE__);
my $CHECK_TIMEOUT = 15;

sub connect_to {
    my ($port) = @_;
    return Redis->new(server => "$HOST:$port", read_timeout => 5);
}

sub target {
    my ($label, $port, $prefix) = @_;
    return { label => $label, port => $port, prefix => $prefix, r => connect_to($port) };
}
my $DIRECT = target('redis', $REDIS_PORT, "${DIRECT_TAG}pl:d:");
my $PROXY = target('cellgate', $PROXY_PORT, 'pl:p:');

sub k { my ($t, $name) = @_; return $t->{prefix} . $name }
sub strip { my ($t, $s) = @_; return $s unless defined $s; $s =~ s/\Q$t->{prefix}\E//g; return $s }
sub other { my ($t) = @_; return connect_to($t->{port}) }

sub dump1 {
    local $Data::Dumper::Indent = 0;
    local $Data::Dumper::Terse = 1;
    local $Data::Dumper::Sortkeys = 1;
    local $Data::Dumper::Useqq = 1;
    my $s = Dumper($_[0]);
    return length($s) <= 300 ? $s : substr($s, 0, 300) . '...(' . length($s) . ' chars)';
}

sub fail { die { fail => $_[0] } }
sub expect { my ($cond, $why) = @_; fail($why) unless $cond }

# Runs the scenario against Redis, then through cellgate; they must agree,
# and equal $expected when given. Returns the proxy's result.
sub same {
    my ($sc, @expected) = @_;
    my $d = $sc->($DIRECT);
    my $p = $sc->($PROXY);
    if (@expected) {
        expect(dump1($d) eq dump1($expected[0]),
            'direct Redis gave ' . dump1($d) . ', test expects ' . dump1($expected[0]) . ' (test bug?)');
    }
    expect(dump1($p) eq dump1($d), 'through cellgate ' . dump1($p) . ', straight to Redis ' . dump1($d));
    return $p;
}

# The message an error reply died with ("[cmd] message"), or undef.
sub error_of {
    my ($fn) = @_;
    eval { $fn->(); 1 } and return undef;
    my $e = $@;
    $e =~ s/,\s+at \S+ line \d+\.?\s*$//s;
    return $e;
}

# Runs $fn in a forked child after $delay seconds, on its own connection;
# returns a function that waits for the child (its exit status: 0 = ok).
sub in_child {
    my ($delay, $fn) = @_;
    my $pid = fork() // die "fork: $!";
    if ($pid == 0) {
        sleep $delay;
        my $ok = eval { $fn->(); 1 };
        POSIX::_exit($ok ? 0 : 1); # no destructors of the parent's connections
    }
    return sub { waitpid($pid, 0); return $? >> 8 };
}

my @CHECKS;
sub check { my ($name, $fn) = @_; push @CHECKS, ["$TAG: $name", $fn] }

# ---------------------------------------------------------------- connection count

check("20 clients with default options use only cellgate's shared upstream connections", sub {
    my @clients = map { Redis->new(server => "$HOST:$PROXY_PORT") } 1 .. 20; # default options
    for my $i (0 .. 19) {
        my $c = $clients[$i];
        $c->set(k($PROXY, "cc:$i"), $i);
        expect(($c->get(k($PROXY, "cc:$i")) // '') eq $i, "client $i read back a wrong value");
        $c->incr(k($PROXY, 'cc:n'));
    }
    my $line = `bash $HERE/upstream_conns.sh`;
    my $rc = $? >> 8;
    chomp $line;
    print "# $TAG: cellgate's connections per Redis node, 20 Perl Redis clients open: $line\n";
    $_->quit for @clients;
    expect($rc == 0, "too many connections from cellgate: $line");
});

# ---------------------------------------------------------------- data types

check('ping and echo', sub {
    same(sub { my ($t) = @_; [$t->{r}->ping, $t->{r}->echo('hello'), $t->{r}->echo("\x00\r\n\xff")] },
        ['PONG', 'hello', "\x00\r\n\xff"]);
});

check('strings (MSET/MGET over keys of many slots)', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        [$r->set(k($t, 's'), 'v1'), $r->get(k($t, 's')), $r->get(k($t, 'missing')),
         $r->set(k($t, 's'), 'x', 'NX'), $r->append(k($t, 's'), '!'), $r->strlen(k($t, 's')),
         $r->getrange(k($t, 's'), 0, 1), $r->mset(k($t, 'm1'), 'a', k($t, 'm2'), '', k($t, 'm3'), 'c'),
         [$r->mget(k($t, 'm1'), k($t, 'm2'), k($t, 'm3'), k($t, 'nope'))],
         $r->setnx(k($t, 'n'), '1'), $r->setnx(k($t, 'n'), '2'), $r->get(k($t, 'n')),
         $r->exists(k($t, 'm1'), k($t, 'm2'), k($t, 'nope')), $r->del(k($t, 'm1'), k($t, 'm2'), k($t, 'm3')),
         $r->type(k($t, 's'))]
    }, ['OK', 'v1', undef, undef, 3, 3, 'v1', 'OK', ['a', '', 'c', undef], 1, 0, '1', 2, 3, 'string']);
});

check('binary values', sub {
    my $all = join '', map { chr } 0 .. 255;
    my $tricky = "\$5\r\nhello\r\n*2\r\n+OK\r\n-ERR x\r\n:1\r\n";
    srand(7);
    my $big = pack('N*', map { int(rand(2**32)) } 1 .. (1 << 18));
    my $bkey = "b:\x00\r\n\xc8";
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        $r->set(k($t, 'b:all'), $all);
        $r->set(k($t, 'b:tricky'), $tricky);
        $r->set(k($t, 'b:empty'), '');
        $r->set(k($t, 'b:big'), $big);
        $r->set(k($t, $bkey), 'binkey');
        $r->hset(k($t, 'b:h'), "\xff\x00", $all);
        my @m = $r->mget(k($t, 'b:all'), k($t, 'b:tricky'));
        [$r->get(k($t, 'b:all')) eq $all ? 1 : 0, $r->get(k($t, 'b:tricky')) eq $tricky ? 1 : 0,
         $r->get(k($t, 'b:empty')), $r->get(k($t, 'b:big')) eq $big ? 1 : 0, $r->strlen(k($t, 'b:big')),
         $r->get(k($t, $bkey)), $r->hget(k($t, 'b:h'), "\xff\x00") eq $all ? 1 : 0,
         ($m[0] eq $all && $m[1] eq $tricky) ? 1 : 0]
    }, [1, 1, '', 1, 1 << 20, 'binkey', 1, 1]);
});

check('counters', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        [$r->incr(k($t, 'c')), $r->incrby(k($t, 'c'), 41), $r->decr(k($t, 'c')), $r->decrby(k($t, 'c'), 2),
         $r->incrbyfloat(k($t, 'f'), 1.5), $r->incrbyfloat(k($t, 'f'), -0.25), $r->get(k($t, 'c')),
         $r->incrby(k($t, 'neg'), '-9223372036854775807')]
    }, [1, 42, 41, 39, '1.5', '1.25', '39', '-9223372036854775807']);
});

check('hashes', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        my $h = k($t, 'h');
        [$r->hset($h, 'f1', '1', 'f2', 'two', 'f3', '3'), $r->hget($h, 'f2'), $r->hget($h, 'nope'),
         {$r->hgetall($h)}, $r->hincrby($h, 'f1', 10), $r->hincrbyfloat($h, 'f3', 0.5), $r->hlen($h),
         $r->hexists($h, 'f2'), $r->hdel($h, 'f2', 'nope'), [$r->hmget($h, 'f1', 'nope', 'f3')],
         [sort $r->hkeys($h)], $r->hsetnx($h, 'f1', 'x'), [$r->hgetall(k($t, 'nohash'))]]
    }, [3, 'two', undef, {f1 => '1', f2 => 'two', f3 => '3'}, 11, '3.5', 3, 1, 1, ['11', undef, '3.5'],
        ['f1', 'f3'], 0, []]);
});

check('lists (RPOPLPUSH/LMOVE on one hash tag)', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        my $l = k($t, 'l');
        [$r->rpush($l, 'a', 'b', 'c'), $r->lpush($l, 'z'), [$r->lrange($l, 0, -1)], $r->llen($l),
         $r->lindex($l, 1), $r->lpop($l), $r->rpop($l), [$r->lpop($l, 5)], $r->lpop($l),
         $r->rpush(k($t, '{l}2'), 1, 2, 3), $r->rpoplpush(k($t, '{l}2'), k($t, '{l}3')),
         $r->lmove(k($t, '{l}2'), k($t, '{l}3'), 'RIGHT', 'LEFT'), [$r->lrange(k($t, '{l}2'), 0, -1)],
         [$r->lrange(k($t, '{l}3'), 0, -1)]]
    }, [3, 4, ['z', 'a', 'b', 'c'], 4, 'a', 'z', 'c', ['a', 'b'], undef, 3, '3', '2', ['1'], ['2', '3']]);
});

check('sets (SINTER/SUNION/SMOVE on one hash tag)', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        my ($s, $s2) = (k($t, '{s}'), k($t, '{s}2'));
        [$r->sadd($s, 'a', 'b', 'c'), [sort $r->smembers($s)], $r->sismember($s, 'b'), $r->sismember($s, 'x'),
         $r->srem($s, 'a'), $r->sadd($s2, 'b', 'd'), [sort $r->sinter($s, $s2)], [sort $r->sunion($s, $s2)],
         [sort $r->sdiff($s, $s2)], $r->smove($s, $s2, 'c'), [sort $r->smembers($s2)],
         [$r->smembers(k($t, 'noset'))]]
    }, [3, ['a', 'b', 'c'], 1, 0, 1, 2, ['b'], ['b', 'c', 'd'], ['c'], 1, ['b', 'c', 'd'], []]);
});

check('sorted sets', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        my $z = k($t, 'z');
        [$r->zadd($z, 1, 'a', 2.5, 'b', -3, 'c'), [$r->zrange($z, 0, -1, 'WITHSCORES')], $r->zscore($z, 'b'),
         $r->zincrby($z, 2, 'a'), $r->zrank($z, 'a'), [$r->zrangebyscore($z, '(0', '+inf')], $r->zcard($z),
         [$r->zpopmin($z)], $r->zrem($z, 'a', 'nope')]
    }, [3, ['c', '-3', 'a', '1', 'b', '2.5'], '2.5', '3', 2, ['b', 'a'], 3, ['c', '-3'], 1]);
});

check('expiry', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        $r->set(k($t, 'e'), 'v', 'EX', 100);
        my $ttl = $r->ttl(k($t, 'e'));
        $r->pexpire(k($t, 'e'), 50000);
        my $pttl = $r->pttl(k($t, 'e'));
        my $per = $r->persist(k($t, 'e'));
        $r->set(k($t, 'short'), 'v', 'PX', 60);
        sleep 0.3;
        [($ttl > 0 && $ttl <= 100) ? 1 : 0, ($pttl > 40000 && $pttl <= 50000) ? 1 : 0, $per,
         $r->ttl(k($t, 'e')), $r->get(k($t, 'short')), $r->ttl(k($t, 'nope'))]
    }, [1, 1, 1, -1, undef, -2]);
});

# ---------------------------------------------------------------- pipelines and transactions

check('pipeline of 1000 commands (callbacks + wait_all_responses)', sub {
    my $res = same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        my @res;
        for my $i (0 .. 999) {
            my $cb = sub { my ($reply, $err) = @_; $res[$i] = defined $err ? "error: $err" : $reply };
            if ($i % 3 == 0) { $r->set(k($t, "pl:$i"), "v$i", $cb) }
            elsif ($i % 3 == 1) { $r->get(k($t, 'pl:' . ($i - 1)), $cb) }
            else { $r->incr(k($t, 'pl:n'), $cb) }
        }
        $r->wait_all_responses;
        \@res;
    });
    for my $i (0 .. 999) {
        my $want = $i % 3 == 0 ? 'OK' : $i % 3 == 1 ? 'v' . ($i - 1) : ($i + 1) / 3;
        expect(defined $res->[$i] && $res->[$i] eq $want,
            "reply $i is " . dump1($res->[$i]) . ", wanted $want (replies out of order?)");
    }
});

check('multi/exec on one hash tag', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        my @q = ($r->multi, $r->set(k($t, '{tx}:a'), '1'), $r->incr(k($t, '{tx}:a')), $r->get(k($t, '{tx}:a')),
            $r->lpush(k($t, '{tx}:l'), 'x'));
        my @ok = $r->exec;
        $r->multi;
        $r->set(k($t, '{tx}:c'), '1');
        my $discarded = $r->discard;
        [\@q, \@ok, $discarded, $r->exists(k($t, '{tx}:c'))]
    }, [['OK', 'QUEUED', 'QUEUED', 'QUEUED', 'QUEUED'], ['OK', 2, '2', 1], 'OK', 0]);
});

check('WATCH + optimistic transaction retry', sub {
    same(sub {
        my ($t) = @_;
        my $key = k($t, 'w:counter');
        $t->{r}->set($key, 10);
        my ($r, $intruder) = (other($t), other($t));
        my @attempts;
        for (1 .. 5) {
            $r->watch($key);
            my $v = $r->get($key);
            push @attempts, $v;
            $intruder->incr($key) if @attempts == 1;
            $r->multi;
            $r->set($key, $v + 1);
            my $res = $r->exec;
            last if defined $res;
        }
        $_->quit for $r, $intruder;
        [\@attempts, $t->{r}->get($key)]
    }, [['10', '11'], '12']);
});

# ---------------------------------------------------------------- pub/sub and blocking

check('pub/sub subscribe, publish from another connection, receive', sub {
    same(sub {
        my ($t) = @_;
        my ($sub, $pub) = (other($t), other($t));
        my @got;
        my $on_msg = sub { my ($msg, $topic) = @_; push @got, ['message', strip($t, $topic), $msg] };
        my $on_pmsg = sub {
            my ($msg, $topic, $pattern) = @_;
            push @got, ['pmessage', strip($t, $pattern), strip($t, $topic), $msg];
        };
        $sub->subscribe(k($t, 'chan'), $on_msg);
        $sub->psubscribe(k($t, 'pat*'), $on_pmsg);
        my $n = $pub->publish(k($t, 'chan'), 'hello');
        my $pn = $pub->publish(k($t, 'pat-1'), "\x00\x01");
        for (1 .. 50) {
            last if @got >= 2;
            $sub->wait_for_messages(0.1);
        }
        my (undef, $numsub) = $pub->pubsub('NUMSUB', k($t, 'chan'));
        $sub->unsubscribe(k($t, 'chan'), $on_msg); # (the callback to remove)
        $sub->punsubscribe(k($t, 'pat*'), $on_pmsg);
        my $after = $pub->publish(k($t, 'chan'), 'nobody');
        $_->quit for $sub, $pub;
        [\@got, $n, $pn, $numsub, $after]
    }, [[['message', 'chan', 'hello'], ['pmessage', 'pat*', 'pat-1', "\x00\x01"]], 1, 1, 1, 0]);
});

check('BLPOP served by a push from another connection', sub {
    same(sub {
        my ($t) = @_;
        my $key = k($t, 'bl:q');
        my $blocker = other($t);
        my $wait = in_child(0.3, sub { connect_to($t->{port})->rpush($key, 'job-1') });
        my @v = $blocker->blpop($key, 4);
        my $child = $wait->();
        my @timed_out = $blocker->blpop(k($t, 'bl:empty'), 1);
        $blocker->quit;
        [$child, [strip($t, $v[0]), $v[1]], \@timed_out, $t->{r}->llen($key)]
    }, [0, ['bl:q', 'job-1'], [undef], 0]);
});

# ---------------------------------------------------------------- errors, scripts, scan

check('error replies die with the message', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        $r->set(k($t, 'err'), 'abc');
        [error_of(sub { $r->incr(k($t, 'err')) }), error_of(sub { $r->lpush(k($t, 'err'), 'x') }),
         defined(error_of(sub { $r->nosuchcommand('a') })) ? 1 : 0, $r->get(k($t, 'err')), $r->ping]
    }, ['[incr] ERR value is not an integer or out of range',
        '[lpush] WRONGTYPE Operation against a key holding the wrong kind of value', 1, 'abc', 'PONG']);
});

check('Lua EVAL / EVALSHA', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        my ($sha) = $r->script_load("return redis.call('INCRBY', KEYS[1], ARGV[1])");
        [[$r->eval('return {KEYS[1] == KEYS[1], ARGV[1], 7}', 1, k($t, 'lua'), 'arg')],
         $r->evalsha($sha, 1, k($t, 'lua:c'), 5), $r->evalsha($sha, 1, k($t, 'lua:c'), 5)]
    }, [[1, 'arg', 7], 5, 10]);
});

check('SCAN over a few hundred keys', sub {
    same(sub {
        my ($t) = @_;
        my $r = $t->{r};
        $r->set(k($t, "scan:$_"), $_, sub { }) for 0 .. 299;
        $r->wait_all_responses;
        my (%seen, $cursor);
        $cursor = 0;
        do {
            my ($next, $keys) = $r->scan($cursor, 'MATCH', k($t, 'scan:*'), 'COUNT', 50);
            $seen{strip($t, $_)} = 1 for @$keys;
            $cursor = $next;
        } while ($cursor ne '0');
        my @names = sort keys %seen;
        [scalar(@names), join(',', @names) eq join(',', sort map { "scan:$_" } 0 .. 299) ? 1 : 0]
    }, [300, 1]);
});

# ---------------------------------------------------------------- main

my @only = @ARGV;
my $failed = 0;
for my $c (@CHECKS) {
    my ($name, $fn) = @$c;
    next if @only && !grep { index($name, $_) >= 0 } @only;
    my $ok = eval {
        local $SIG{ALRM} = sub { die "timed out after ${CHECK_TIMEOUT}s\n" };
        alarm $CHECK_TIMEOUT;
        $fn->();
        alarm 0;
        1;
    };
    alarm 0;
    if ($ok) {
        print "ok - $name\n";
    } else {
        $failed++;
        my $e = $@;
        my $why = ref $e eq 'HASH' ? $e->{fail} : "died: $e";
        $why =~ s/[\r\n]+/ /g;
        print "not ok - $name: $why\n";
    }
}
exit($failed ? 1 : 0);
