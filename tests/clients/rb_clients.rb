# redis-rb (Debian ruby-redis) against cellgate, compared with the same calls
# straight against Redis. Clients are made as redis-rb's README shows,
# Redis.new(host:, port:), with default options (only a socket timeout, so a
# hang fails a check instead of the part).
#
#   ruby rb_clients.rb [check name filter...]
#
# Environment (run.sh sets it): PROXY_PORT, REDIS_PORT, CG_MODE, DIRECT_TAG
# (cluster mode: every direct key carries this hash tag and REDIS_PORT is the
# master that owns it), NODE_PORTS, CG_PID (upstream_conns.sh). Keys a command
# needs on one node share a hash tag in their name ({tx}, {l}, {s}); the
# others spread over every master in cluster mode. Prints `ok - name` or
# `not ok - name: why` per check; exits 1 if any failed.
require 'redis'
require 'timeout'

HOST = '127.0.0.1'
PROXY_PORT = Integer(ENV.fetch('PROXY_PORT'))
REDIS_PORT = Integer(ENV.fetch('REDIS_PORT'))
DIRECT_TAG = ENV.fetch('DIRECT_TAG', '')
HERE = __dir__
TAG = 'redis-rb'
CHECK_TIMEOUT = 15

def connect(port)
  Redis.new(host: HOST, port: port, timeout: 5)
end

class Fail < StandardError; end

# One side of a comparison: a client and a key prefix.
class Target
  attr_reader :label, :port, :prefix, :r

  def initialize(label, port, prefix)
    @label = label
    @port = port
    @prefix = prefix
    @r = connect(port)
  end

  def k(name)
    prefix + name
  end

  def strip(s)
    s.is_a?(String) ? s.gsub(prefix, '') : s
  end

  # Another application connection to the same side.
  def other
    connect(port)
  end
end

DIRECT = Target.new('redis', REDIS_PORT, "#{DIRECT_TAG}rb:d:")
PROXY = Target.new('cellgate', PROXY_PORT, 'rb:p:')

def expect(cond, why)
  raise Fail, why unless cond
end

def short(v, n = 300)
  s = v.inspect
  s.length <= n ? s : "#{s[0, n]}...(#{s.length} chars)"
end

NONE = Object.new
# Runs the scenario against Redis, then through cellgate; they must agree,
# and equal `expected` when given. Returns the proxy's result.
def same(expected = NONE)
  d = yield DIRECT
  p = yield PROXY
  unless expected.equal?(NONE)
    expect(d == expected, "direct Redis gave #{short(d)}, test expects #{short(expected)} (test bug?)")
  end
  expect(p == d, "through cellgate #{short(p)}, straight to Redis #{short(d)}")
  p
end

# [class name, message] of the error the block raised, or nil.
def error_of
  yield
  nil
rescue Redis::BaseError => e
  [e.class.name, e.message]
end

CHECKS = []
def check(name, &blk)
  CHECKS << ["#{TAG}: #{name}", blk]
end

# ---------------------------------------------------------------- connection count

check "20 clients with default options use only cellgate's shared upstream connections" do
  clients = (0...20).map { Redis.new(host: HOST, port: PROXY_PORT) } # default options
  begin
    clients.each_with_index do |c, i|
      c.set(PROXY.k("cc:#{i}"), i.to_s)
      expect(c.get(PROXY.k("cc:#{i}")) == i.to_s, "client #{i} read back a wrong value")
      c.incr(PROXY.k('cc:n'))
    end
    line = `bash #{HERE}/upstream_conns.sh`.strip
    ok = $?.success?
    puts "# #{TAG}: cellgate's connections per Redis node, 20 redis-rb clients open: #{line}"
    expect(ok, "too many connections from cellgate: #{line}")
  ensure
    clients.each(&:close)
  end
end

# ---------------------------------------------------------------- data types

check 'ping and echo' do
  same(['PONG', 'hello', "\x00\r\n\xff".b]) { |t| [t.r.ping, t.r.echo('hello'), t.r.echo("\x00\r\n\xff".b).b] }
end

check 'strings (MSET/MGET over keys of many slots)' do
  same(['OK', 'v1', nil, false, 3, 3, 'v1', 'OK', ['a', '', 'c', nil], true, false, '1', 2, 3, 'string']) do |t|
    r = t.r
    [r.set(t.k('s'), 'v1'), r.get(t.k('s')), r.get(t.k('missing')), r.set(t.k('s'), 'x', nx: true),
     r.append(t.k('s'), '!'), r.strlen(t.k('s')), r.getrange(t.k('s'), 0, 1),
     r.mset(t.k('m1'), 'a', t.k('m2'), '', t.k('m3'), 'c'),
     r.mget(t.k('m1'), t.k('m2'), t.k('m3'), t.k('nope')),
     r.setnx(t.k('n'), '1'), r.setnx(t.k('n'), '2'), r.get(t.k('n')),
     r.exists(t.k('m1'), t.k('m2'), t.k('nope')), r.del(t.k('m1'), t.k('m2'), t.k('m3')), r.type(t.k('s'))]
  end
end

check 'binary values' do
  all = (0..255).map(&:chr).join.b
  tricky = "$5\r\nhello\r\n*2\r\n+OK\r\n-ERR x\r\n:1\r\n".b
  big = Random.new(7).bytes(1 << 20)
  bkey = "b:\x00\r\n\xc8".b
  same([true, true, '', true, 1 << 20, 'binkey', true, true]) do |t|
    r = t.r
    r.set(t.k('b:all'), all)
    r.set(t.k('b:tricky'), tricky)
    r.set(t.k('b:empty'), '')
    r.set(t.k('b:big'), big)
    r.set(t.k(bkey), 'binkey')
    r.hset(t.k('b:h'), "\xff\x00".b, all)
    [r.get(t.k('b:all')).b == all, r.get(t.k('b:tricky')).b == tricky, r.get(t.k('b:empty')),
     r.get(t.k('b:big')).b == big, r.strlen(t.k('b:big')), r.get(t.k(bkey)),
     r.hget(t.k('b:h'), "\xff\x00".b).b == all, r.mget(t.k('b:all'), t.k('b:tricky')).map(&:b) == [all, tricky]]
  end
end

check 'counters' do
  same([1, 42, 41, 39, 1.5, 1.25, '39', -9_223_372_036_854_775_807]) do |t|
    r = t.r
    [r.incr(t.k('c')), r.incrby(t.k('c'), 41), r.decr(t.k('c')), r.decrby(t.k('c'), 2),
     r.incrbyfloat(t.k('f'), 1.5), r.incrbyfloat(t.k('f'), -0.25), r.get(t.k('c')),
     r.incrby(t.k('neg'), -9_223_372_036_854_775_807)]
  end
end

check 'hashes' do
  same([3, 'two', nil, { 'f1' => '1', 'f2' => 'two', 'f3' => '3' }, 11, 3.5, 3, true, 1,
        ['11', nil, '3.5'], %w[f1 f3], false, {}]) do |t|
    r = t.r
    h = t.k('h')
    [r.hset(h, 'f1' => '1', 'f2' => 'two', 'f3' => '3'), r.hget(h, 'f2'), r.hget(h, 'nope'),
     r.hgetall(h), r.hincrby(h, 'f1', 10), r.hincrbyfloat(h, 'f3', 0.5), r.hlen(h),
     r.hexists(h, 'f2'), r.hdel(h, 'f2', 'nope'), r.hmget(h, 'f1', 'nope', 'f3'), r.hkeys(h).sort,
     r.hsetnx(h, 'f1', 'x'), r.hgetall(t.k('nohash'))]
  end
end

check 'lists (RPOPLPUSH/LMOVE on one hash tag)' do
  same([3, 4, %w[z a b c], 4, 'a', 'z', 'c', %w[a b], nil, 3, '3', '2', %w[1], %w[2 3]]) do |t|
    r = t.r
    l = t.k('l')
    [r.rpush(l, %w[a b c]), r.lpush(l, 'z'), r.lrange(l, 0, -1), r.llen(l), r.lindex(l, 1),
     r.lpop(l), r.rpop(l), r.lpop(l, 5), r.lpop(l),
     r.rpush(t.k('{l}2'), %w[1 2 3]), r.rpoplpush(t.k('{l}2'), t.k('{l}3')),
     r.lmove(t.k('{l}2'), t.k('{l}3'), 'RIGHT', 'LEFT'), r.lrange(t.k('{l}2'), 0, -1),
     r.lrange(t.k('{l}3'), 0, -1)]
  end
end

check 'sets (SINTER/SUNION/SMOVE on one hash tag)' do
  same([3, %w[a b c], true, false, 1, 2, %w[b], %w[b c d], %w[c], true, %w[b c d], []]) do |t|
    r = t.r
    s = t.k('{s}')
    s2 = t.k('{s}2')
    [r.sadd(s, %w[a b c]), r.smembers(s).sort, r.sismember(s, 'b'), r.sismember(s, 'x'),
     r.srem(s, %w[a]), r.sadd(s2, %w[b d]), r.sinter(s, s2).sort, r.sunion(s, s2).sort,
     r.sdiff(s, s2).sort, r.smove(s, s2, 'c'), r.smembers(s2).sort, r.smembers(t.k('noset'))]
  end
end

check 'sorted sets' do
  same([3, [['c', -3.0], ['a', 1.0], ['b', 2.5]], 2.5, 3.0, 2, %w[b a], 3, ['c', -3.0], 1]) do |t|
    r = t.r
    z = t.k('z')
    [r.zadd(z, [[1, 'a'], [2.5, 'b'], [-3, 'c']]), r.zrange(z, 0, -1, with_scores: true), r.zscore(z, 'b'),
     r.zincrby(z, 2, 'a'), r.zrank(z, 'a'), r.zrangebyscore(z, '(0', '+inf'), r.zcard(z),
     r.zpopmin(z), r.zrem(z, %w[a nope])]
  end
end

check 'expiry' do
  same([true, true, true, -1, nil, -2]) do |t|
    r = t.r
    r.set(t.k('e'), 'v', ex: 100)
    ttl = r.ttl(t.k('e'))
    r.pexpire(t.k('e'), 50_000)
    pttl = r.pttl(t.k('e'))
    per = r.persist(t.k('e'))
    r.set(t.k('short'), 'v', px: 60)
    sleep 0.3
    [ttl.between?(1, 100), pttl.between?(40_001, 50_000), per, r.ttl(t.k('e')), r.get(t.k('short')),
     r.ttl(t.k('nope'))]
  end
end

# ---------------------------------------------------------------- pipelines and transactions

check 'pipelined block of 1000 commands' do
  res = same do |t|
    t.r.pipelined do |p|
      1000.times do |i|
        case i % 3
        when 0 then p.set(t.k("pl:#{i}"), "v#{i}")
        when 1 then p.get(t.k("pl:#{i - 1}"))
        else p.incr(t.k('pl:n'))
        end
      end
    end
  end
  res.each_with_index do |v, i|
    want = [('OK' if i % 3 == 0), ("v#{i - 1}" if i % 3 == 1), ((i + 1) / 3 if i % 3 == 2)].compact.first
    expect(v == want, "reply #{i} is #{short(v)}, wanted #{short(want)} (replies out of order?)")
  end
end

check 'multi/exec on one hash tag' do
  same([['OK', 2, '2', 1, %w[x]], ['Redis::CommandError', 'ERR value is not an integer or out of range'], '2',
        'Redis::CommandError', 0]) do |t|
    r = t.r
    r.set(t.k('{tx}:s'), 'x')
    ok = r.multi do |tx|
      tx.set(t.k('{tx}:a'), '1')
      tx.incr(t.k('{tx}:a'))
      tx.get(t.k('{tx}:a'))
      tx.lpush(t.k('{tx}:l'), 'x')
      tx.lrange(t.k('{tx}:l'), 0, -1)
    end
    # A runtime error inside: the other commands still run, EXEC's error raises.
    runtime = error_of { r.multi { |tx| tx.incr(t.k('{tx}:s')); tx.set(t.k('{tx}:b'), '2') } }
    # Refused at queue time: EXECABORT, nothing runs.
    queued = error_of { r.multi { |tx| tx.set(t.k('{tx}:c'), '1'); tx.call(:set, t.k('{tx}:d')) } }
    [ok, runtime, r.get(t.k('{tx}:b')), queued && queued[0], r.exists(t.k('{tx}:c'))]
  end
end

check 'WATCH + optimistic transaction retry' do
  same([[10, 11], '12']) do |t|
    key = t.k('w:counter')
    t.r.set(key, 10)
    r = t.other
    intruder = t.other
    attempts = []
    5.times do
      res = r.watch(key) do
        v = Integer(r.get(key))
        attempts << v
        intruder.incr(key) if attempts.size == 1
        r.multi { |tx| tx.set(key, v + 1) }
      end
      break unless res.nil?
    end
    r.close
    intruder.close
    [attempts, t.r.get(key)]
  end
end

# ---------------------------------------------------------------- pub/sub and blocking

check 'pub/sub subscribe, publish from another connection, receive' do
  same([[[:subscribe, 'chan', 1], [:message, 'chan', 'hello'], [:unsubscribe, 'chan', 0],
         [:psubscribe, 'pat*', 1], [:pmessage, 'pat*', 'pat-1', "\x00\x01".b], [:punsubscribe, 'pat*', 0]],
        [1, 1, 0]]) do |t|
    sub = t.other
    pub = t.other
    got = []
    counts = []
    # The publisher waits until the subscriber is in, then publishes.
    publisher = lambda do |after, channel, msg|
      Thread.new do
        sleep 0.02 until got.size >= after
        counts << pub.publish(channel, msg)
      end
    end
    thr = publisher.call(1, t.k('chan'), 'hello')
    sub.subscribe_with_timeout(5, t.k('chan')) do |on|
      on.subscribe { |ch, n| got << [:subscribe, t.strip(ch), n] }
      on.message do |ch, msg|
        got << [:message, t.strip(ch), msg]
        sub.unsubscribe
      end
      on.unsubscribe { |ch, n| got << [:unsubscribe, t.strip(ch), n] }
    end
    thr.join(5)
    thr = publisher.call(4, t.k('pat-1'), "\x00\x01".b)
    sub.psubscribe_with_timeout(5, t.k('pat*')) do |on|
      on.psubscribe { |pat, n| got << [:psubscribe, t.strip(pat), n] }
      on.pmessage do |pat, ch, msg|
        got << [:pmessage, t.strip(pat), t.strip(ch), msg.b]
        sub.punsubscribe
      end
      on.punsubscribe { |pat, n| got << [:punsubscribe, t.strip(pat), n] }
    end
    thr.join(5)
    counts << pub.publish(t.k('chan'), 'nobody')
    sub.close
    pub.close
    [got, counts]
  end
end

check 'BLPOP served by a push from another connection' do
  same([1, %w[bl:q job-1], nil]) do |t|
    blocker = t.other
    key = t.k('bl:q')
    res = nil
    thr = Thread.new { res = blocker.blpop(key, timeout: 4) }
    sleep 0.3 # let BLPOP reach the server; correctness does not depend on it
    pushed = t.r.rpush(key, 'job-1')
    expect(thr.join(6), "#{t.label}: BLPOP still blocked after the push")
    timed_out = blocker.blpop(t.k('bl:empty'), timeout: 1)
    blocker.close
    [pushed, res && [t.strip(res[0]), res[1]], timed_out]
  end
end

# ---------------------------------------------------------------- errors, scripts, scan

check 'error replies raise Redis::CommandError' do
  same([['Redis::CommandError', 'ERR value is not an integer or out of range'],
        ['Redis::CommandError', 'WRONGTYPE Operation against a key holding the wrong kind of value'],
        'Redis::CommandError', 'abc', 'PONG']) do |t|
    r = t.r
    r.set(t.k('err'), 'abc')
    [error_of { r.incr(t.k('err')) }, error_of { r.lpush(t.k('err'), 'x') },
     error_of { r.call(:nosuchcommand, 'a') }&.first, r.get(t.k('err')), r.ping]
  end
end

check 'Lua EVAL / EVALSHA' do
  same([[1, 'arg', 7], 5, 10]) do |t|
    r = t.r
    sha = r.script(:load, "return redis.call('INCRBY', KEYS[1], ARGV[1])")
    [r.eval('return {KEYS[1] == KEYS[1], ARGV[1], 7}', keys: [t.k('lua')], argv: ['arg']),
     r.evalsha(sha, keys: [t.k('lua:c')], argv: [5]), r.evalsha(sha, keys: [t.k('lua:c')], argv: [5])]
  end
end

check 'scan_each over a few hundred keys' do
  same([300, true]) do |t|
    t.r.pipelined { |p| 300.times { |i| p.set(t.k("scan:#{i}"), i) } }
    keys = t.r.scan_each(match: t.k('scan:*'), count: 50).map { |k| t.strip(k) }.uniq
    [keys.size, keys.sort == (0...300).map { |i| "scan:#{i}" }.sort]
  end
end

# ---------------------------------------------------------------- main

only = ARGV
failed = 0
CHECKS.each do |name, blk|
  next if !only.empty? && only.none? { |o| name.include?(o) }

  begin
    Timeout.timeout(CHECK_TIMEOUT) { blk.call }
    puts "ok - #{name}"
  rescue Fail => e
    failed += 1
    puts "not ok - #{name}: #{e.message}"
  rescue StandardError, Timeout::Error => e
    failed += 1
    where = e.backtrace&.find { |l| l.include?(__FILE__) }
    puts "not ok - #{name}: #{e.class}: #{e.message.tr("\r\n", '  ')}#{where ? " (#{where.sub(/^.*?:(\d+).*/, 'line \1')})" : ''}"
  end
  $stdout.flush
end
exit(failed.zero? ? 0 : 1)
