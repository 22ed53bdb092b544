/* Sessions and the shared-connection invariant, in front of one Redis:
 * client-library handshakes answered by cellgate (they stay multiplexed),
 * CLIENT ID/INFO/LIST/KILL/REPLY, SELECT and HELLO validated as Redis does,
 * commands that would break a shared connection refused or given one of
 * their own while other clients run (their replies must stay their own),
 * slow commands costing others latency and not errors, SCRIPT KILL of a
 * busy script, replies of any depth, reused private connections, and a
 * reply larger than the output limit reaching a client that reads it. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PX_TEST_SUITE(it_session);

#define NBYSTANDERS 20  /* clients running beside the one under test */
#define NHANDSHAKES 50  /* default-handshake clients in the multiplex test */
#define PIPE        200 /* pipelined GETs per bystander */

/* Connections Redis sees from anything but `self` (CLIENT LIST lines). */
static int redis_connections(redisContext *self)
{
    redisReply *r = px_cmd(self, "CLIENT LIST");
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    for (const char *p = r->str; (p = strchr(p, '\n')) != NULL; p++) {
        n++;
    }
    freeReplyObject(r);
    return n - 1;
}

/* The value of field `name=` in a CLIENT INFO/LIST line, into out. */
static void info_field(const char *line, const char *name, char *out,
                       size_t outlen)
{
    char key[64];
    const char *p;
    size_t n = 0;

    snprintf(key, sizeof(key), " %s=", name);
    p = strstr(line, key);
    cr_assert_not_null(p, "no %s in '%s'", name, line);
    p += strlen(key);
    while (p[n] != ' ' && p[n] != '\n' && p[n] != '\0' && n + 1 < outlen) {
        n++;
    }
    memcpy(out, p, n);
    out[n] = '\0';
}

static void init_debug(void)
{
    static const char *const args[] = { "--enable-debug-command", "yes", NULL };
    px_env_prepare();
    px_redis_start(&px_env()->redis, args);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "commands: +debug\n");
}

/* For the tests of commands the default policy refuses ordinary clients
 * (CLIENT LIST/KILL/NO-EVICT/UNBLOCK, SYNC, REPLCONF: docs/commands.md
 * "Command policy"): what cellgate does with them once allowed. */
static void init_all_commands(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "commands: allcommands\n" PX_NO_ADMIN);
}

/* ---------------- Handshakes stay multiplexed ---------------- */

Test(it_session, default_handshakes_stay_multiplexed, .init = init_all_commands,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c[NHANDSHAKES];
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    char key[32], want[32], lib[64];
    int i, conns;

    for (i = 0; i < NHANDSHAKES; i++) {
        c[i] = px_connect(px_env()->proxy.port);
        /* What node-redis, ioredis, redis-py, go-redis, Jedis and Lettuce
         * send when they connect, in one form or another. */
        redisAppendCommand(c[i], "CLIENT SETINFO LIB-NAME lib%d", i % 5);
        redisAppendCommand(c[i], "CLIENT SETINFO LIB-VER 1.%d", i);
        redisAppendCommand(c[i], "CLIENT SETNAME app%d", i);
        redisAppendCommand(c[i], "SELECT 0");
        redisAppendCommand(c[i], "CLIENT NO-EVICT on");
        redisAppendCommand(c[i], "READONLY");
        redisAppendCommand(c[i], "SET hs:%d v%d", i, i);
        for (int k = 0; k < 7; k++) {
            px_check_status(px_next(c[i]), "OK");
        }
    }
    for (i = 0; i < NHANDSHAKES; i++) {
        snprintf(key, sizeof(key), "hs:%d", i);
        snprintf(want, sizeof(want), "v%d", i);
        px_check_str(px_cmd(c[i], "GET %s", key), want);
        snprintf(want, sizeof(want), "app%d", i);
        px_check_str(px_cmd(c[i], "CLIENT GETNAME"), want);
    }
    conns = redis_connections(direct);
    fprintf(
        stderr,
        "it_session: redis sees %d connections from cellgate for %d clients\n",
        conns, NHANDSHAKES);
    /* upstream_pool (2) shared connections and the first COMMAND's: no
     * client got a connection of its own. */
    cr_assert_leq(conns, 3, "%d connections for %d clients", conns,
                  NHANDSHAKES);
    {
        redisReply *r = px_cmd(c[7], "CLIENT INFO");
        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        info_field(r->str, "lib-name", lib, sizeof(lib));
        cr_assert_str_eq(lib, "lib2");
        info_field(r->str, "lib-ver", lib, sizeof(lib));
        cr_assert_str_eq(lib, "1.7");
        info_field(r->str, "name", lib, sizeof(lib));
        cr_assert_str_eq(lib, "app7");
        info_field(r->str, "flags", lib, sizeof(lib));
        cr_assert_str_eq(lib, "re");
        freeReplyObject(r);
        r = px_cmd(c[0], "INFO");
        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        cr_assert_not_null(strstr(r->str, "lib0=10,"), "INFO: %s", r->str);
        freeReplyObject(r);
    }
    for (i = 0; i < NHANDSHAKES; i++) {
        redisFree(c[i]);
    }
    redisFree(direct);
}

/* ---------------- CLIENT ID / INFO / LIST / KILL ---------------- */

Test(it_session, client_id_info_list_describe_cellgate_clients,
     .init = init_all_commands, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisReply *r;
    long long ida, idb;
    char f[64], line[64];

    r = px_cmd(a, "CLIENT ID");
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    ida = r->integer;
    freeReplyObject(r);
    r = px_cmd(b, "HELLO 2");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_str_eq(r->element[6]->str, "id");
    idb = r->element[7]->integer;
    freeReplyObject(r);
    px_check_int(px_cmd(b, "CLIENT ID"), idb);
    cr_assert_neq(ida, idb);

    r = px_cmd(a, "CLIENT INFO");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert(strncmp(r->str, "id=", 3) == 0 && r->str[r->len - 1] == '\n',
              "%s", r->str);
    snprintf(line, sizeof(line), "id=%lld ", ida);
    cr_assert(strncmp(r->str, line, strlen(line)) == 0, "%s", r->str);
    info_field(r->str, "cmd", f, sizeof(f));
    cr_assert_str_eq(f, "client|info");
    info_field(r->str, "resp", f, sizeof(f));
    cr_assert_str_eq(f, "2");
    info_field(r->str, "laddr", f, sizeof(f));
    snprintf(line, sizeof(line), "127.0.0.1:%d", px_env()->proxy.port);
    cr_assert_str_eq(f, line);
    freeReplyObject(r);

    /* LIST: both clients; ID filters; TYPE pubsub holds neither. */
    r = px_cmd(a, "CLIENT LIST");
    snprintf(line, sizeof(line), "id=%lld ", idb);
    cr_assert_not_null(strstr(r->str, line), "%s", r->str);
    freeReplyObject(r);
    r = px_cmd(a, "CLIENT LIST ID %lld 999999", idb);
    cr_assert(strncmp(r->str, line, strlen(line)) == 0, "%s", r->str);
    cr_assert_eq(strchr(r->str, '\n'), r->str + r->len - 1, "one line only: %s",
                 r->str);
    freeReplyObject(r);
    px_check_bulk(px_cmd(a, "CLIENT LIST TYPE pubsub"), "", 0);
    px_check_error(px_cmd(a, "CLIENT LIST TYPE nope"),
                   "ERR Unknown client type 'nope'");
    px_check_error(px_cmd(a, "CLIENT LIST ID x"), "ERR Invalid client ID");
    px_check_error(px_cmd(a, "CLIENT LIST foo"), "ERR syntax error");
    /* A client blocked in BRPOP shows flags=b, also when its private
     * connection holds a selected db. */
    px_check_status(px_cmd(b, "SELECT 9"), "OK");
    redisAppendCommand(b, "BRPOP nolist 5");
    px_flush(b);
    for (int k = 0; k < 100; k++) {
        r = px_cmd(a, "CLIENT LIST ID %lld", idb);
        info_field(r->str, "flags", f, sizeof(f));
        freeReplyObject(r);
        if (strcmp(f, "b") == 0) {
            break;
        }
        px_sleep_ms(10);
    }
    cr_assert_str_eq(f, "b");
    /* A push in db 0 does not wake b, which waits in db 9. */
    px_check_int(px_cmd(a, "RPUSH nolist x"), 1);
    px_check_int(px_cmd(a, "LLEN nolist"), 1);
    px_check_error(px_cmd(a, "CLIENT ID x"),
                   "ERR wrong number of arguments for 'client|id' command");

    /* KILL by id closes b (and only b); the count is Redis's. */
    px_check_int(px_cmd(a, "CLIENT KILL ID %lld", idb), 1);
    r = redisCommand(b, "PING");
    cr_assert(r == NULL || r->type == REDIS_REPLY_ERROR, "b still served");
    if (r != NULL) {
        freeReplyObject(r);
    }
    px_check_int(px_cmd(a, "CLIENT KILL ID %lld", idb), 0);
    px_check_int(px_cmd(a, "CLIENT KILL ID %lld", ida), 0); /* SKIPME */
    px_check_error(px_cmd(a, "CLIENT KILL 1.2.3.4:5"), "ERR No such client");
    px_check_error(px_cmd(a, "CLIENT KILL ID 0"),
                   "ERR client-id should be greater than 0");
    px_check_error(px_cmd(a, "CLIENT KILL USER nobody"),
                   "ERR No such user 'nobody'");
    px_check_status(px_cmd(a, "PING"), "PONG");
    redisFree(a);
    redisFree(b);
}

static void init_admin(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "admin_password: adm\ncommands: +client|kill\n");
}

Test(it_session, client_kill_needs_admin_when_an_admin_password_is_set,
     .init = init_admin, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisReply *r = px_cmd(b, "CLIENT ID");
    long long idb = r->integer;

    freeReplyObject(r);
    px_check_error(px_cmd(a, "CLIENT KILL ID %lld", idb),
                   "NOPERM this user has no permissions to run the "
                   "'client|kill' command");
    px_check_status(px_cmd(b, "PING"), "PONG");
    px_check_status(px_cmd(a, "AUTH admin adm"), "OK");
    px_check_int(px_cmd(a, "CLIENT KILL ID %lld", idb), 1);
    redisFree(a);
    redisFree(b);
}

/* ---------------- Byte-exact comparisons with Redis ---------------- */

/* Sends `req` raw to port and returns what came back within ~300 ms. */
static size_t raw_exchange(int port, const char *req, char *out, size_t cap)
{
    int fd = px_raw_connect(port, 0), closed = 0;
    size_t n;

    cr_assert_eq(px_raw_send(fd, req, strlen(req)), 0);
    n = px_raw_read(fd, out, cap - 1, 300, &closed);
    out[n] = '\0';
    close(fd);
    return n;
}

/* `req` gives the same bytes through cellgate as straight from Redis. */
static void same_bytes(const char *req)
{
    char px[4096], d[4096];
    size_t npx = raw_exchange(px_env()->proxy.port, req, px, sizeof(px));
    size_t nd = raw_exchange(px_env()->redis.port, req, d, sizeof(d));

    cr_assert(npx == nd && memcmp(px, d, nd) == 0,
              "%s: cellgate '%s', Redis '%s'", req, px, d);
}

Test(it_session, reply_modes_and_validation_match_redis,
     .init = init_all_commands, .fini = px_env_fini, .timeout = 60)
{
    /* CLIENT REPLY: the commands run, their replies are dropped. */
    same_bytes("CLIENT REPLY OFF\r\nSET x 1\r\nSET x 2\r\nCLIENT REPLY ON\r\n"
               "PING\r\nGET x\r\n");
    same_bytes("SET y 1\r\nCLIENT REPLY SKIP\r\nINCR y\r\nINCR y\r\n"
               "CLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nINCR y\r\n"
               "CLIENT REPLY ON\r\nGET y\r\nCLIENT REPLY maybe\r\n");
    same_bytes("CLIENT REPLY OFF\r\nGET nosuchkey\r\nFOO\r\n"
               "CLIENT REPLY ON\r\nECHO back\r\n");
    /* Subscription confirmations are pushes: they arrive with REPLY OFF. */
    same_bytes("CLIENT REPLY OFF\r\nPSUBSCRIBE ch*\r\nSUBSCRIBE a b\r\n"
               "UNSUBSCRIBE a\r\n");
    {
        static const char want[] = "$1\r\nx\r\n>3\r\n$9\r\nsubscribe\r\n"
                                   "$2\r\nch\r\n:1\r\n";
        char out[4096];
        size_t n = raw_exchange(px_env()->proxy.port,
                                "HELLO 3\r\nECHO x\r\nCLIENT REPLY OFF\r\n"
                                "SUBSCRIBE ch\r\nGET k\r\n",
                                out, sizeof(out));
        cr_assert(n > sizeof(want) - 1 &&
                      strcmp(out + n - (sizeof(want) - 1), want) == 0,
                  "RESP3 REPLY OFF subscribe: '%s'", out);
    }
    /* Non-positive multibulk lengths and empty lines are skipped. */
    same_bytes("*-10\r\n*0\r\n*-1\r\n\r\n\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
    /* SELECT and CLIENT validate as Redis does. */
    same_bytes("SELECT 00\r\nSELECT +0\r\nSELECT -0\r\nSELECT 0x\r\n"
               "SELECT 99999999999\r\nSELECT -1\r\nSELECT 0\r\n");
    same_bytes("CLIENT SETNAME \"a b\"\r\nCLIENT GETNAME\r\n"
               "CLIENT SETNAME ok\r\nCLIENT GETNAME\r\nCLIENT SETNAME \"\"\r\n"
               "CLIENT GETNAME\r\nCLIENT NO-EVICT maybe\r\n"
               "CLIENT NO-EVICT on\r\nCLIENT GETREDIR\r\n"
               "CLIENT TRACKINGINFO\r\n");
    same_bytes("CLIENT UNBLOCK x\r\nCLIENT UNBLOCK 12345\r\n"
               "CLIENT UNBLOCK 12345 foo\r\nCLIENT CACHING yes\r\n");
}

/* CLIENT SETINFO is Redis 7.2's, answered as 7.2 does even in front of
 * 7.0, which does not know it. */
Test(it_session, client_setinfo_validates_as_redis_7_2, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;
    char f[64];

    px_check_status(px_cmd(c, "CLIENT SETINFO lib-name redis-py"), "OK");
    px_check_status(px_cmd(c, "CLIENT SETINFO LIB-VER 5.0.1"), "OK");
    px_check_error(px_cmd(c, "CLIENT SETINFO lib-name %s", "a b"),
                   "ERR lib-name cannot contain spaces, newlines or special "
                   "characters.");
    px_check_error(px_cmd(c, "CLIENT SETINFO color red"),
                   "ERR Unrecognized option 'color'");
    px_check_error(px_cmd(c, "CLIENT SETINFO lib-name"),
                   "ERR wrong number of arguments for 'client|setinfo' "
                   "command");
    r = px_cmd(c, "CLIENT INFO");
    info_field(r->str, "lib-name", f, sizeof(f));
    cr_assert_str_eq(f, "redis-py");
    info_field(r->str, "lib-ver", f, sizeof(f));
    cr_assert_str_eq(f, "5.0.1");
    freeReplyObject(r);
    /* RESET keeps the library, as Redis does, and drops the name. */
    px_check_status(px_cmd(c, "CLIENT SETNAME n"), "OK");
    px_check_status(px_cmd(c, "RESET"), "RESET");
    px_check_nil(px_cmd(c, "CLIENT GETNAME"));
    r = px_cmd(c, "CLIENT INFO");
    info_field(r->str, "lib-name", f, sizeof(f));
    cr_assert_str_eq(f, "redis-py");
    freeReplyObject(r);
    redisFree(c);
}

static void init_requirepass(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, "requirepass: pw\n");
}

Test(it_session, hello_checks_credentials_before_it_sets_the_name,
     .init = init_requirepass, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    px_check_error_prefix(px_cmd(c, "HELLO 3 SETNAME x AUTH default wrong"),
                          "WRONGPASS");
    px_check_error_prefix(px_cmd(c, "HELLO 2 SETNAME y"), "NOAUTH");
    px_check_error_prefix(px_cmd(c, "SELECT 00"), "NOAUTH");
    px_check_status(px_cmd(c, "AUTH pw"), "OK");
    px_check_nil(px_cmd(c, "CLIENT GETNAME"));
    redisFree(c);
}

/* ---------------- No client harms another ---------------- */

/* NBYSTANDERS clients each pipeline PIPE GETs of their own key; `hostile`
 * (or, when NULL, the raw socket `raw_fd`, with inline commands) sends
 * `cmds` (a NULL-ended list) in the middle. Every bystander must get
 * exactly its own values, in order. */
static void bystanders_around_fd(redisContext *hostile, int raw_fd,
                                 const char *const *cmds, int expect_error)
{
    redisContext *c[NBYSTANDERS];
    char want[32];
    int i, k;

    for (i = 0; i < NBYSTANDERS; i++) {
        c[i] = px_connect(px_env()->proxy.port);
        px_check_status(px_cmd(c[i], "SET own:%d mine-%d", i, i), "OK");
    }
    for (k = 0; k < PIPE; k++) {
        for (i = 0; i < NBYSTANDERS; i++) {
            redisAppendCommand(c[i], "GET own:%d", i);
        }
        if (k == PIPE / 4) {
            for (const char *const *p = cmds; *p != NULL; p++) {
                if (hostile != NULL) {
                    redisAppendCommand(hostile, "%s", *p);
                } else {
                    cr_assert_eq(px_raw_send(raw_fd, *p, strlen(*p)), 0);
                    cr_assert_eq(px_raw_send(raw_fd, "\r\n", 2), 0);
                }
            }
            if (hostile != NULL) {
                px_flush(hostile);
            }
        }
        if (k % 50 == 0) {
            for (i = 0; i < NBYSTANDERS; i++) {
                px_flush(c[i]);
            }
        }
    }
    for (const char *const *p = cmds; hostile != NULL && *p != NULL; p++) {
        redisReply *r = px_next(hostile);
        if (expect_error) {
            cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: not refused", *p);
        }
        freeReplyObject(r);
    }
    for (i = 0; i < NBYSTANDERS; i++) {
        snprintf(want, sizeof(want), "mine-%d", i);
        for (k = 0; k < PIPE; k++) {
            px_check_str(px_next(c[i]), want);
        }
        redisFree(c[i]);
    }
}

static void bystanders_around(redisContext *hostile, const char *const *cmds,
                              int expect_error)
{
    bystanders_around_fd(hostile, -1, cmds, expect_error);
}

Test(it_session, replication_commands_never_reach_a_shared_connection,
     .init = init_all_commands, .fini = px_env_fini, .timeout = 60)
{
    static const char *const refused[] = {
        "REPLCONF GETACK *",
        "REPLCONF ACK 0",
        "REPLCONF listening-port 1",
        NULL,
    };
    static const char *const sync[] = { "SYNC", NULL };
    redisContext *h = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0), closed = 0;
    char rdb[64];
    size_t n;

    /* REPLCONF has no reply: refused, whoever sends it. */
    bystanders_around(h, refused, 1);
    px_check_error(px_cmd(h, "REPLCONF GETACK *"),
                   "ERR 'replconf' is not available through cellgate: it "
                   "would take over a connection other clients share");
    px_check_status(px_cmd(h, "PING"), "PONG");
    /* SYNC gets a tunnel of its own: the replication stream (an RDB
     * bulk without a final CRLF) reaches this client, nobody else. */
    bystanders_around_fd(NULL, fd, sync, 0);
    n = px_raw_read(fd, rdb, sizeof(rdb) - 1, 2000, &closed);
    rdb[n] = '\0';
    cr_assert(n > 10 && rdb[0] == '$' && strstr(rdb, "REDIS") != NULL,
              "no RDB after SYNC: '%s'", rdb);
    close(fd);
    px_check_status(px_cmd(h, "SET after-sync 1"), "OK");
    redisFree(h);
}

Test(it_session, script_debug_stays_on_a_connection_of_its_own,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const cmds[] = { "SCRIPT DEBUG YES", NULL };
    redisContext *h = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);

    bystanders_around(h, cmds, 0);
    /* The others' scripts and limiter calls are not debugged. */
    for (int i = 0; i < 20; i++) {
        px_check_int(px_cmd(o, "EVAL %s 0", "return 7"), 7);
        redisReply *r = px_cmd(o, "CL.THROTTLE dbg%d 5 10 60", i);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        freeReplyObject(r);
    }
    px_check_status(px_cmd(h, "SCRIPT DEBUG NO"), "OK");
    redisFree(h);
    px_check_int(px_cmd(o, "EVAL %s 0", "return 8"), 8);
    redisFree(o);
}

Test(it_session, self_nesting_script_reply_is_framed_next_to_other_clients,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    /* Redis answers with thousands of nested arrays ending in an error;
     * hiredis (7 levels) cannot read that, so the client is a raw
     * socket. */
    static const char *const cmds[] = {
        "EVAL \"local a = {}; local b = {a}; a[1] = b; return a\" 0", "PING",
        NULL
    };
    static char out[1 << 20];
    int fd = px_raw_connect(px_env()->proxy.port, 0), closed = 0;
    size_t n = 0;
    long long deadline = px_now_ms() + 5000;

    bystanders_around_fd(NULL, fd, cmds, 0);
    while (px_now_ms() < deadline &&
           (n < 7 || memcmp(out + n - 7, "+PONG\r\n", 7) != 0)) {
        n += px_raw_read(fd, out + n, sizeof(out) - 1 - n, 200, &closed);
        cr_assert(!closed && n < sizeof(out) - 1, "closed or too long");
    }
    out[n] = '\0';
    cr_assert_not_null(strstr(out, "-ERR reached lua stack limit\r\n+PONG"),
                       "no error then PONG after %zu bytes", n);
    cr_assert_eq(strncmp(out, "*1\r\n*1\r\n", 8), 0);
    close(fd);
}

/* A client that runs for seconds on the node (a script, DEBUG SLEEP) costs
 * the clients sharing its connection latency, never errors. */
Test(it_session, long_commands_cost_others_latency_not_errors,
     .init = init_debug, .fini = px_env_fini, .timeout = 90)
{
    static const char script[] =
        "local t = redis.call('TIME'); local s = t[1] * 1000000 + t[2];"
        " repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - s >"
        " 2000000 return 1";
    const char *slow[] = { "EVAL", script, "0" };
    size_t slow_len[] = { 4, sizeof(script) - 1, 1 };
    redisContext *h = px_connect(px_env()->proxy.port);
    redisContext *c[NBYSTANDERS];
    char want[32];
    int i, round, errors = 0;

    for (i = 0; i < NBYSTANDERS; i++) {
        c[i] = px_connect(px_env()->proxy.port);
    }
    for (round = 0; round < 2; round++) {
        if (round == 0) {
            redisAppendCommandArgv(h, 3, slow, slow_len);
        } else {
            redisAppendCommand(h, "DEBUG SLEEP 2");
        }
        px_flush(h);
        px_sleep_ms(100);
        for (int k = 0; k < 3; k++) {
            for (i = 0; i < NBYSTANDERS; i++) {
                redisAppendCommand(c[i], "SET lat:%d r%d-%d", i, round, k);
                redisAppendCommand(c[i], "GET lat:%d", i);
                px_flush(c[i]);
            }
            for (i = 0; i < NBYSTANDERS; i++) {
                redisReply *r = px_next(c[i]);
                errors += r->type == REDIS_REPLY_ERROR;
                freeReplyObject(r);
                snprintf(want, sizeof(want), "r%d-%d", round, k);
                r = px_next(c[i]);
                errors += r->type == REDIS_REPLY_ERROR;
                if (r->type != REDIS_REPLY_ERROR) {
                    cr_assert_str_eq(r->str, want);
                }
                freeReplyObject(r);
            }
        }
        redisReply *r = px_next(h);
        cr_assert_neq(r->type, REDIS_REPLY_ERROR, "%s", r->str);
        freeReplyObject(r);
    }
    cr_assert_eq(errors, 0, "%d errors", errors);
    for (i = 0; i < NBYSTANDERS; i++) {
        redisFree(c[i]);
    }
    redisFree(h);
}

/* Redis calls itself busy after 500 ms here, and so does cellgate; the
 * test's client loads a function of its own (refused by default). */
static void init_busy(void)
{
    static const char *const args[] = { "--busy-reply-threshold", "500", NULL };
    px_env_prepare();
    px_redis_start(&px_env()->redis, args);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "busy_reply_threshold_ms: 500\n"
                       "commands: \"+function|load\"\n");
}

Test(it_session, script_kill_reaches_a_node_busy_with_a_script,
     .init = init_busy, .fini = px_env_fini, .timeout = 60)
{
    redisContext *h = px_connect(px_env()->proxy.port);
    redisContext *k = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);

    px_check_error_prefix(px_cmd(k, "SCRIPT KILL"), "NOTBUSY");
    redisAppendCommand(h, "EVAL %s 0", "while true do end");
    px_flush(h);
    px_sleep_ms(200);
    /* Answered once Redis passes its 500 ms threshold, on a connection
     * that is not queued behind the script. */
    px_check_status(px_cmd(k, "SCRIPT KILL"), "OK");
    px_check_error_prefix(px_next(h), "ERR Script killed by user with");
    px_check_status(px_cmd(o, "SET after kill"), "OK");
    px_check_str(px_cmd(h, "GET after"), "kill");
    /* The same for a function. */
    px_check_str(px_cmd(o, "FUNCTION LOAD %s",
                        "#!lua name=spin\nredis.register_function('spin', "
                        "function() while true do end end)"),
                 "spin");
    redisAppendCommand(h, "FCALL spin 0");
    px_flush(h);
    px_sleep_ms(200);
    px_check_status(px_cmd(k, "FUNCTION KILL"), "OK");
    px_check_error_prefix(px_next(h), "ERR Script killed by user with");
    px_check_status(px_cmd(o, "PING"), "PONG");
    redisFree(h);
    redisFree(k);
    redisFree(o);
}

/* ---------------- Private connections ---------------- */

Test(it_session, private_connections_are_reset_and_reused, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    redisContext *c[5];
    redisReply *r;
    long long before, after;
    int i, job;

    for (i = 0; i < 5; i++) {
        c[i] = px_connect(px_env()->proxy.port);
    }
    /* Warm up: one transaction opens the first private connection. */
    px_check_status(px_cmd(c[0], "MULTI"), "OK");
    px_check_status(px_cmd(c[0], "INCR jobs"), "QUEUED");
    freeReplyObject(px_cmd(c[0], "EXEC"));
    r = px_cmd(direct, "INFO stats");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    before = atoll(strstr(r->str, "total_connections_received:") + 27);
    freeReplyObject(r);
    /* A job queue: each worker runs a MULTI (and a WATCH, a SELECT) per
     * job, one after another. */
    for (job = 0; job < 40; job++) {
        redisContext *w = c[job % 5];
        px_check_status(px_cmd(w, "WATCH jobs"), "OK");
        px_check_status(px_cmd(w, "MULTI"), "OK");
        px_check_status(px_cmd(w, "INCR jobs"), "QUEUED");
        r = px_cmd(w, "EXEC");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        freeReplyObject(r);
        px_check_status(px_cmd(w, "SELECT 3"), "OK");
        px_check_nil(px_cmd(w, "GET jobs")); /* db 3: nothing leaked */
        px_check_status(px_cmd(w, "SELECT 0"), "OK");
    }
    px_check_str(px_cmd(c[1], "GET jobs"), "41");
    r = px_cmd(direct, "INFO stats");
    after = atoll(strstr(r->str, "total_connections_received:") + 27);
    freeReplyObject(r);
    fprintf(stderr, "it_session: 40 jobs opened %lld connections to Redis\n",
            after - before);
    cr_assert_leq(after - before, 2, "%lld new connections for 40 jobs",
                  after - before);
    /* A reused connection carries nothing of its last client: not the
     * db (above), not a subscription. */
    r = px_cmd(c[2], "SUBSCRIBE ch");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    r = px_cmd(c[2], "UNSUBSCRIBE");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    px_check_status(px_cmd(c[3], "MULTI"), "OK");
    px_check_status(px_cmd(c[3], "GET jobs"), "QUEUED");
    r = px_cmd(c[3], "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_str_eq(r->element[0]->str, "41");
    freeReplyObject(r);
    for (i = 0; i < 5; i++) {
        redisFree(c[i]);
    }
    redisFree(direct);
}

/* ---------------- Output limit ---------------- */

static void init_small_output(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "client_max_output_bytes: 1mb\n");
}

Test(it_session, reply_larger_than_the_output_limit_reaches_a_reader,
     .init = init_small_output, .fini = px_env_fini, .timeout = 60)
{
    const size_t big = 3 * 1024 * 1024;
    char *v = malloc(big);
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;

    cr_assert_not_null(v);
    for (size_t i = 0; i < big; i++) {
        v[i] = (char)('a' + i % 26);
    }
    r = redisCommand(c, "SET big %b", v, big);
    px_check_status(r, "OK");
    for (int k = 0; k < 3; k++) {
        r = px_cmd(c, "GET big");
        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        cr_assert_eq(r->len, big);
        cr_assert_eq(memcmp(r->str, v, big), 0);
        freeReplyObject(r);
    }
    px_check_status(px_cmd(c, "PING"), "PONG");
    free(v);
    redisFree(c);
}

/* A client that asks CLIENT TRACKING ... REDIRECT waits until the target's
 * private connection learns its Redis id. One killed meanwhile leaves an
 * orphan request behind, freed when the id arrives: nobody crashes and the
 * others are served. Repeated, so some go before the id comes. */
Test(it_session, killed_while_waiting_for_a_redirect_target_harms_nobody,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *other = px_connect(px_env()->proxy.port);
    redisReply *r;
    char cmd[256], buf[64];
    int round;

    for (round = 0; round < 40; round++) {
        redisContext *target = px_connect(px_env()->proxy.port);
        long long tid, wid;
        int fd;

        r = px_cmd(target, "CLIENT ID");
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        tid = r->integer;
        freeReplyObject(r);
        fd = px_raw_connect(px_env()->proxy.port, 0);
        snprintf(cmd, sizeof(cmd), "*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n");
        px_raw_send(fd, cmd, strlen(cmd));
        memset(buf, 0, sizeof(buf));
        px_raw_read(fd, buf, 4, 5000, NULL);
        cr_assert_eq(buf[0], ':', "CLIENT ID: %s", buf);
        wid = atoll(buf + 1);
        snprintf(cmd, sizeof(cmd),
                 "*5\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n"
                 "$8\r\nREDIRECT\r\n$%d\r\n%lld\r\n",
                 snprintf(NULL, 0, "%lld", tid), tid);
        px_raw_send(fd, cmd, strlen(cmd));
        /* Killed while (or before) the target's id is learned. */
        snprintf(cmd, sizeof(cmd),
                 "*4\r\n$6\r\nCLIENT\r\n$4\r\nKILL\r\n"
                 "$2\r\nID\r\n$%d\r\n%lld\r\n",
                 snprintf(NULL, 0, "%lld", wid), wid);
        redisAppendFormattedCommand(other, cmd, strlen(cmd));
        r = px_cmd(other, "SET k%d v", round);
        freeReplyObject(r); /* the KILL's reply */
        r = NULL;
        cr_assert_eq(redisGetReply(other, (void **)&r), REDIS_OK);
        px_check_status(r, "OK");
        close(fd);
        redisFree(target);
    }
    r = px_cmd(other, "GET k39");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(r->str, "v");
    freeReplyObject(r);
    cr_assert(px_child_alive(&px_env()->proxy), "cellgate is still running");
    redisFree(other);
}
