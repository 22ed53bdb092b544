/* cellgate: command line, configuration, then the server loop.
 *
 * Precedence: defaults < proxy.yaml (--config) < command-line flags. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/acl.h"
#include "conf/conf.h"
#include "conf/limits.h"
#include "proxy/core/log.h"
#include "proxy/core/util.h"
#include "proxy/server.h"
#include "proxy/server_tls.h"

/* Room for every error of a bad file. */
#define MAIN_ERRBUF 8192

static const char main_usage[] =
    "Usage: cellgate [options]\n"
    "\n"
    "A Redis proxy with rate limiting (CL.THROTTLE, LIMITER).\n"
    "\n"
    "Options:\n"
    "  --config FILE        proxy.yaml to load (flags override it)\n"
    "  --listen HOST:PORT   where clients connect (default 127.0.0.1:7777;\n"
    "                       off: TLS clients only)\n"
    "  --tls-listen HOST:PORT\n"
    "                       where TLS clients connect (tls_cert_file...)\n"
    "  --upstream-tls       connect to Redis over TLS (upstream_tls: yes)\n"
    "  --upstream HOST:PORT one Redis server to forward to\n"
    "  --cluster HOST:PORT[,HOST:PORT...]\n"
    "                       Redis Cluster seed nodes\n"
    "  --sentinel HOST:PORT[,HOST:PORT...]\n"
    "                       Redis Sentinels that name the master\n"
    "  --sentinel-master NAME\n"
    "                       the name they monitor it by (sentinel_master)\n"
    "  --limits FILE        limits.yaml (the limits tree)\n"
    "  --metrics-listen HOST:PORT\n"
    "                       serve Prometheus metrics at /metrics (default off)\n"
    "  --log-level LEVEL    debug, info, warn or error (default info)\n"
    "  --commands RULES     command rules for ordinary clients, applied after\n"
    "                       proxy.yaml's (\"+flushall -keys\", allcommands)\n"
    "  --check-config       validate the configuration and exit\n"
    "  --print-acl          print the ACL SETUSER lines of the two Redis users\n"
    "                       (upstream_user, limiter_user) and exit\n"
    "  --version            print the version and exit\n"
    "  --help               print this help and exit\n"
    "\n"
    "With none of --upstream, --cluster and --sentinel, cellgate runs\n"
    "embedded: ordinary commands get -ERR no upstream configured.\n";

/* Parsed flags that are not conf fields. */
struct main_opts {
    const char *config; /* borrowed from argv */
    int check_config;   /* --check-config */
    int print_acl;      /* --print-acl */
};

static void main_bad_usage(const char *what, const char *arg)
{
    fprintf(stderr, "cellgate: %s '%s'\n%s", what, arg, main_usage);
}

/* Matches "--name value" and "--name=value". Returns the value or NULL. */
static const char *main_opt_value(int argc, char **argv, int *i,
                                  const char *name, int *err)
{
    size_t n = strlen(name);
    const char *a = argv[*i];

    if (strncmp(a, name, n) != 0) {
        return NULL;
    }
    if (a[n] == '=') {
        return a + n + 1;
    }
    if (a[n] != '\0') {
        return NULL;
    }
    if (*i + 1 >= argc) {
        main_bad_usage("missing value for option", name);
        *err = 1;
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

/* First pass: --config, --help, --version, --check-config, --print-acl.
 * Returns -1 to
 * exit 0, 1 on a usage error, 0 to go on. */
static int main_first_pass(int argc, char **argv, struct main_opts *o)
{
    int i, err = 0;
    const char *v;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(main_usage, stdout);
            return -1;
        }
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-v") == 0) {
            printf("cellgate %s\n", PX_VERSION);
            return -1;
        }
        if (strcmp(argv[i], "--check-config") == 0) {
            o->check_config = 1;
            continue;
        }
        if (strcmp(argv[i], "--print-acl") == 0) {
            o->print_acl = 1;
            continue;
        }
        v = main_opt_value(argc, argv, &i, "--config", &err);
        if (err) {
            return 1;
        }
        if (v != NULL) {
            o->config = v;
        }
    }
    return 0;
}

/* Second pass: every other flag overrides the file. 0 or 1 (usage error). */
static int main_apply_flags(int argc, char **argv, struct conf *c)
{
    int i, err = 0, lvl;
    const char *v;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check-config") == 0 ||
            strcmp(argv[i], "--print-acl") == 0) {
            continue;
        }
        if ((v = main_opt_value(argc, argv, &i, "--config", &err)) != NULL) {
            continue;
        }
        if (strcmp(argv[i], "--upstream-tls") == 0) {
            c->tls.upstream = 1;
            continue;
        }
        if (!err &&
            (v = main_opt_value(argc, argv, &i, "--tls-listen", &err))) {
            if (strcmp(v, "off") == 0) {
                memset(&c->tls.listen, 0, sizeof(c->tls.listen));
            } else if (conf_parse_addr(v, &c->tls.listen) != CONF_OK) {
                main_bad_usage("invalid --tls-listen address", v);
                return 1;
            }
            continue;
        }
        if (!err && (v = main_opt_value(argc, argv, &i, "--listen", &err))) {
            if (strcmp(v, "off") == 0) {
                memset(&c->listen, 0, sizeof(c->listen));
            } else if (conf_parse_addr(v, &c->listen) != CONF_OK) {
                main_bad_usage("invalid --listen address", v);
                return 1;
            }
            continue;
        }
        if (!err && (v = main_opt_value(argc, argv, &i, "--upstream", &err))) {
            if (conf_parse_addr(v, &c->upstream) != CONF_OK) {
                main_bad_usage("invalid --upstream address", v);
                return 1;
            }
            c->nseeds = 0;
            c->sentinel.naddrs = 0;
            continue;
        }
        if (!err && (v = main_opt_value(argc, argv, &i, "--cluster", &err))) {
            if (conf_parse_seeds(c, v) != CONF_OK) {
                main_bad_usage("invalid --cluster seed list", v);
                return 1;
            }
            c->upstream.port = 0;
            c->sentinel.naddrs = 0;
            continue;
        }
        if (!err && (v = main_opt_value(argc, argv, &i, "--sentinel", &err))) {
            const char *bad;
            size_t badlen;
            if (conf_addr_split(v, c->sentinel.addrs, &c->sentinel.naddrs, &bad,
                                &badlen) != CONF_ADDRS_OK) {
                main_bad_usage("invalid --sentinel list", v);
                return 1;
            }
            c->upstream.port = 0;
            c->nseeds = 0;
            continue;
        }
        if (!err &&
            (v = main_opt_value(argc, argv, &i, "--sentinel-master", &err))) {
            PX_CHECK_OOM(conf_set_str(&c->sentinel.master, v));
            continue;
        }
        if (!err &&
            (v = main_opt_value(argc, argv, &i, "--metrics-listen", &err))) {
            if (conf_parse_addr(v, &c->metrics_listen) != CONF_OK) {
                main_bad_usage("invalid --metrics-listen address", v);
                return 1;
            }
            continue;
        }
        if (!err && (v = main_opt_value(argc, argv, &i, "--limits", &err))) {
            PX_CHECK_OOM(conf_set_str(&c->limits_file, v));
            continue;
        }
        if (!err && (v = main_opt_value(argc, argv, &i, "--log-level", &err))) {
            lvl = conf_log_level_parse(v);
            if (lvl < 0) {
                main_bad_usage("invalid --log-level", v);
                return 1;
            }
            c->log_level = (enum conf_log_level)lvl;
            continue;
        }
        if (!err && (v = main_opt_value(argc, argv, &i, "--commands", &err))) {
            const char *bad = v;
            size_t badlen = strlen(v);
            int rc = cmdpolicy_apply_all(&c->commands, v, &bad, &badlen);
            if (rc != CMDPOLICY_OK) {
                fprintf(stderr, "cellgate: --commands: %s '%.*s'\n",
                        cmdpolicy_strerror(rc), (int)badlen, bad);
                return 1;
            }
            continue;
        }
        if (err) {
            return 1;
        }
        main_bad_usage("unknown option", argv[i]);
        return 1;
    }
    return 0;
}

/* --check-config: the limits file too, every error with its location.
 * 0 when valid (or none is configured), else 1. */
static int main_check_limits(const struct conf *conf)
{
    struct limits_tree *t = NULL;
    char *errbuf;
    int rc = 0;

    if (conf->limits_file == NULL) {
        return 0;
    }
    errbuf = px_malloc(MAIN_ERRBUF);
    errbuf[0] = '\0';
    if (limits_load_file(conf->limits_file, &t, errbuf, MAIN_ERRBUF) !=
        LIMITS_OK) {
        fprintf(stderr, "%s%s", errbuf,
                errbuf[0] != '\0' && errbuf[strlen(errbuf) - 1] == '\n' ? ""
                                                                        : "\n");
        rc = 1;
    }
    limits_free(t);
    px_free(errbuf);
    return rc;
}

/* What every use of the configuration checks once it is complete (the
 * file and the flags): the ACL users' needs (acl_conf_check), so start-up
 * and --check-config refuse what --print-acl could not print. 0, or 1
 * after printing the reason. */
static int main_check_conf(const struct conf *c)
{
    char err[MAIN_ERRBUF];
    const char *why = conf_sentinel_invalid(c);

    if (why != NULL) {
        fprintf(stderr, "cellgate: %s\n", why);
        return 1;
    }
    if (acl_conf_check(c, err, sizeof(err)) != 0 ||
        conf_tls_check(c, err, sizeof(err)) != 0) {
        fprintf(stderr, "cellgate: %s\n", err);
        return 1;
    }
    return 0;
}

/* --print-acl: the two users' ACL SETUSER lines on stdout. 0, or 1 when
 * proxy.yaml does not name both users with their passwords. */
static int main_print_acl(const struct conf *c)
{
    size_t n;
    char *text;

    if (c->upstream_user == NULL || c->upstream_password == NULL ||
        c->limiter_user == NULL || c->limiter_password == NULL) {
        fprintf(stderr,
                "cellgate: --print-acl needs upstream_user, "
                "upstream_password, limiter_user and limiter_password in "
                "proxy.yaml (--config)\n");
        return 1;
    }
    n = acl_setuser_lines(c, NULL, 0);
    text = px_malloc(n + 1);
    if (n == 0 || acl_setuser_lines(c, text, n + 1) != n) {
        fprintf(stderr, "cellgate: out of memory\n");
        px_free(text);
        return 1;
    }
    fputs(text, stdout);
    px_free(text);
    return 0;
}

int main(int argc, char **argv)
{
    struct main_opts o = { 0 };
    struct conf conf;
    char *errbuf;
    int rc;

    rc = main_first_pass(argc, argv, &o);
    if (rc != 0) {
        return rc < 0 ? 0 : 1;
    }
    if (conf_init(&conf) != CONF_OK) {
        fprintf(stderr, "cellgate: out of memory\n");
        return 1;
    }
    if (o.config != NULL) {
        errbuf = px_malloc(MAIN_ERRBUF);
        errbuf[0] = '\0';
        if (conf_load_file(&conf, o.config, errbuf, MAIN_ERRBUF) != CONF_OK) {
            fprintf(stderr, "%s%s", errbuf,
                    errbuf[0] != '\0' && errbuf[strlen(errbuf) - 1] == '\n'
                        ? ""
                        : "\n");
            px_free(errbuf);
            conf_free(&conf);
            return 1;
        }
        px_free(errbuf);
    }
    if (main_apply_flags(argc, argv, &conf) != 0 || main_check_conf(&conf)) {
        conf_free(&conf);
        return 1;
    }
    if (o.print_acl) {
        rc = main_print_acl(&conf);
        conf_free(&conf);
        return rc;
    }
    if (o.check_config) {
        char err[MAIN_ERRBUF];
        rc = main_check_limits(&conf);
        if (rc == 0 && server_tls_check(&conf, err, sizeof(err)) != 0) {
            fprintf(stderr, "cellgate: %s\n", err);
            rc = 1;
        }
        if (rc == 0) {
            printf("cellgate: configuration OK\n");
        }
        conf_free(&conf);
        return rc;
    }
    /* Writes to a peer that left must fail with EPIPE, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    log_set_level((enum log_level)conf.log_level);
    if (server_init(&conf) != PX_OK) {
        conf_free(&conf);
        return 1;
    }
    rc = server_run();
    conf_free(&conf);
    return rc;
}
