/* Loading and reloading the limits file (see limiter_reload.h).
 *
 *   RELOAD / SIGHUP --> limiter_reload_start
 *        | a run already going: wait in reloads.next for the one after it
 *        v
 *   job: uv_queue_work --pool--> limits_load_file (read + parse)
 *        v  (loop)
 *   refused: every request gets the errors, the old rules stay
 *   parsed:  bind its rules' counters, a slice per loop turn (uv_idle)
 *        v
 *   swap the tree and its counters in, +OK to every request, the old tree
 *   freed in the pool (free_job) --> the next run, when one is due
 *
 * Ownership: the job owns its path, the tree until it is swapped in, the
 * counters array being filled, and its requests (linked by req->unode, so
 * req_orphan leaves a request whose client left in the list, and the
 * reply of the run frees it). The pool thread touches only the job's path,
 * tree, rc and err, and the loop none of them until the after-work
 * callback. */
#include "proxy/limiter/limiter_reload.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/conf.h"
#include "conf/limits.h"
#include "proxy/core/core.h"
#include "proxy/core/log.h"
#include "proxy/core/metrics.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"

/* One run of a reload. */
struct limiter_reload_job {
    uv_work_t work;              /* the read and parse, in the pool */
    struct limiter_reloads *rs;  /* borrowed: its context */
    char *path;                  /* owned: the file, as configured */
    struct limits_tree *tree;    /* owned until swapped in */
    struct metrics_rule **rules; /* owned array, borrowed entries: the
                                    tree's counters, bound so far */
    size_t nbound;               /* entries of rules filled */
    int rc;                      /* limits_load_file's */
    char err[1024];              /* ... and its errors */
    struct queue reqs;           /* RELOAD requests this run answers */
    unsigned sighup : 1;         /* SIGHUP asked for this run */
    unsigned binding : 1;        /* back from the pool, binding */
};

/* The old tree, freed in the pool. */
struct limiter_reload_free {
    uv_work_t work;
    struct limits_tree *tree; /* owned */
};

static struct metrics *limiter_reload_metrics(const struct limiter_reloads *rs)
{
    return rs->core != NULL ? rs->core->metrics : NULL;
}

/* Moves every entry of `from` to the tail of `to`, in order. */
static void limiter_reload_move(struct queue *from, struct queue *to)
{
    while (!queue_empty(from)) {
        struct queue *n = queue_head(from);
        queue_remove(n);
        queue_insert_tail(to, n);
    }
}

/* ---------------- Loading at start ---------------- */

/* The counters of every rule of the tree in force (made on first sight,
 * kept across reloads), and the file's hash. */
static void limiter_reload_bind_all(struct limiter_reloads *rs)
{
    struct metrics *m = limiter_reload_metrics(rs);
    const struct limits_tree *t = *rs->limits;
    size_t i, n = limits_rule_count(t);

    px_free(*rs->rules);
    *rs->rules = NULL;
    if (m == NULL) {
        return;
    }
    *rs->rules = px_calloc(n > 0 ? n : 1, sizeof(**rs->rules));
    for (i = 0; i < n; i++) {
        (*rs->rules)[i] = metrics_rule(m, limits_rule_pattern(t, i));
    }
    metrics_set_sha256(m, limits_sha256(t));
}

int limiter_reload_load(struct limiter_reloads *rs, const char *path, char *err,
                        size_t errlen)
{
    struct limits_tree *t = NULL;

    if (path == NULL) {
        return PX_OK;
    }
    if (limits_load_file(path, &t, err, errlen) != LIMITS_OK) {
        return PX_ERR;
    }
    limits_free(*rs->limits);
    *rs->limits = t;
    limiter_reload_bind_all(rs);
    return PX_OK;
}

/* ---------------- A run ---------------- */

static void limiter_reload_run(struct limiter_reloads *rs, struct queue *reqs,
                               int sighup);

static void limiter_reload_free_work(uv_work_t *w)
{
    limits_free(container_of(w, struct limiter_reload_free, work)->tree);
}

static void limiter_reload_free_done(uv_work_t *w, int status)
{
    struct limiter_reload_free *f =
        container_of(w, struct limiter_reload_free, work);

    if (status == UV_ECANCELED) {
        limits_free(f->tree);
    }
    px_free(f);
}

/* Frees `t` in the pool: a large tree is many small allocations. */
static void limiter_reload_free_tree(struct limiter_reloads *rs,
                                     struct limits_tree *t)
{
    struct limiter_reload_free *f;

    if (t == NULL) {
        return;
    }
    if (rs->core == NULL) {
        limits_free(t);
        return;
    }
    f = px_calloc(1, sizeof(*f));
    f->tree = t;
    if (uv_queue_work(rs->core->loop, &f->work, limiter_reload_free_work,
                      limiter_reload_free_done) < 0) {
        limits_free(t);
        px_free(f);
    }
}

/* Answers every request of `reqs` with +OK (`err` NULL) or the error. */
static void limiter_reload_answer(struct queue *reqs, const char *err)
{
    static const char reply_ok[] = "+OK\r\n";

    while (!queue_empty(reqs)) {
        struct req *req = container_of(queue_head(reqs), struct req, unode);
        queue_remove(&req->unode);
        if (err == NULL) {
            req_reply(req, reply_ok, sizeof(reply_ok) - 1);
        } else {
            req_reply_error(req, "%s", err);
        }
    }
}

/* Ends `job` (answering its requests with `err`, NULL: +OK), then starts
 * the run that waits, if any. */
static void limiter_reload_end(struct limiter_reload_job *job, const char *err)
{
    struct limiter_reloads *rs = job->rs;
    struct queue next;
    int sighup = rs->next_sighup;

    limiter_reload_answer(&job->reqs, err);
    limits_free(job->tree);
    px_free(job->rules);
    px_free(job->path);
    px_free(job);
    rs->running = NULL;
    if (rs->stopping) {
        limiter_reload_answer(&rs->next, "proxy shutting down");
        if (rs->handles) {
            uv_close((uv_handle_t *)&rs->nudge, NULL);
            rs->handles = 0;
        }
        return;
    }
    if (rs->next_due) {
        rs->next_due = 0;
        rs->next_sighup = 0;
        queue_init(&next);
        limiter_reload_move(&rs->next, &next);
        limiter_reload_run(rs, &next, sighup);
    }
}

/* The bind is done: the new tree and its counters replace the old. */
static void limiter_reload_swap(struct limiter_reload_job *job)
{
    struct limiter_reloads *rs = job->rs;
    struct metrics *m = limiter_reload_metrics(rs);
    struct limits_tree *old = *rs->limits;

    *rs->limits = job->tree;
    job->tree = NULL;
    px_free(*rs->rules);
    *rs->rules = job->rules;
    job->rules = NULL;
    if (m != NULL) {
        metrics_set_sha256(m, limits_sha256(*rs->limits));
        m->reloads_ok++;
    }
    limiter_reload_free_tree(rs, old);
    log_info("%s: %s reloaded", job->sighup ? "SIGHUP" : "limits", job->path);
    limiter_reload_end(job, NULL);
}

/* One slice of the bind, once per loop turn. */
static void limiter_reload_on_bind(uv_idle_t *h)
{
    struct limiter_reloads *rs = container_of(h, struct limiter_reloads, bind);
    struct limiter_reload_job *job = rs->running;
    struct metrics *m = limiter_reload_metrics(rs);
    size_t n = limits_rule_count(job->tree);
    size_t end = n - job->nbound > LIMITER_RELOAD_BIND_SLICE
                     ? job->nbound + LIMITER_RELOAD_BIND_SLICE
                     : n;

    for (; job->nbound < end; job->nbound++) {
        job->rules[job->nbound] =
            metrics_rule(m, limits_rule_pattern(job->tree, job->nbound));
    }
    if (job->nbound == n) {
        uv_idle_stop(h);
        job->binding = 0;
        limiter_reload_swap(job);
    }
}

/* In the pool: the read and the parse. */
static void limiter_reload_work(uv_work_t *w)
{
    struct limiter_reload_job *job =
        container_of(w, struct limiter_reload_job, work);

    job->rc =
        limits_load_file(job->path, &job->tree, job->err, sizeof(job->err));
}

/* Back on the loop. */
static void limiter_reload_done(uv_work_t *w, int status)
{
    struct limiter_reload_job *job =
        container_of(w, struct limiter_reload_job, work);
    struct limiter_reloads *rs = job->rs;
    struct metrics *m = limiter_reload_metrics(rs);
    size_t len;

    if (rs->stopping || status == UV_ECANCELED) {
        limiter_reload_end(job, "proxy shutting down");
        return;
    }
    if (job->rc != LIMITS_OK) {
        len = strlen(job->err);
        while (len > 0 &&
               (job->err[len - 1] == '\n' || job->err[len - 1] == ' ')) {
            job->err[--len] = '\0';
        }
        if (m != NULL) {
            m->reloads_failed++;
        }
        log_warn("%s: %s refused, old rules kept: %s",
                 job->sighup ? "SIGHUP" : "limits", job->path, job->err);
        limiter_reload_end(job, job->err);
        return;
    }
    if (m == NULL) {
        limiter_reload_swap(job);
        return;
    }
    job->rules =
        px_calloc(limits_rule_count(job->tree) + 1, sizeof(*job->rules));
    job->binding = 1;
    uv_idle_start(&rs->bind, limiter_reload_on_bind);
}

/* Starts a run for the requests of `reqs` (moved into the job). */
static void limiter_reload_run(struct limiter_reloads *rs, struct queue *reqs,
                               int sighup)
{
    struct limiter_reload_job *job = px_calloc(1, sizeof(*job));

    job->rs = rs;
    job->path =
        px_strndup(rs->conf->limits_file, strlen(rs->conf->limits_file));
    job->sighup = sighup != 0;
    queue_init(&job->reqs);
    limiter_reload_move(reqs, &job->reqs);
    rs->running = job;
    if (uv_queue_work(rs->core->loop, &job->work, limiter_reload_work,
                      limiter_reload_done) < 0) {
        snprintf(job->err, sizeof(job->err), "cannot start the reload");
        limiter_reload_end(job, job->err);
    }
}

/* ---------------- Shutdown ---------------- */

/* Opens a FIFO the reader may be blocked on for writing, and closes it:
 * the reader's open returns and it reads an end of file. */
static void limiter_reload_on_nudge(uv_timer_t *t)
{
    struct limiter_reloads *rs = container_of(t, struct limiter_reloads, nudge);
    struct limiter_reload_job *job = rs->running;
    struct stat st;
    int fd;

    if (job == NULL || stat(job->path, &st) != 0 || !S_ISFIFO(st.st_mode)) {
        return;
    }
    fd = open(job->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
    }
}

/* ---------------- The interface (limiter_reload.h) ---------------- */

void limiter_reloads_init(struct limiter_reloads *rs, struct core *core,
                          const struct conf *conf, struct limits_tree **limits,
                          struct metrics_rule ***rules)
{
    memset(rs, 0, sizeof(*rs));
    rs->core = core;
    rs->conf = conf;
    rs->limits = limits;
    rs->rules = rules;
    queue_init(&rs->next);
    if (core != NULL) {
        uv_idle_init(core->loop, &rs->bind);
        uv_timer_init(core->loop, &rs->nudge);
        rs->handles = 1;
    }
}

void limiter_reload_start(struct limiter_reloads *rs, struct req *req)
{
    struct queue reqs;

    PX_ASSERT(rs->conf->limits_file != NULL && rs->core != NULL);
    if (req != NULL) {
        PX_ASSERT(!queue_linked(&req->unode));
    }
    if (rs->stopping) {
        if (req != NULL) {
            req_reply_error(req, "proxy shutting down");
        }
        return;
    }
    if (rs->running != NULL) {
        rs->next_due = 1;
        rs->next_sighup |= req == NULL;
        if (req != NULL) {
            queue_insert_tail(&rs->next, &req->unode);
        }
        return;
    }
    queue_init(&reqs);
    if (req != NULL) {
        queue_insert_tail(&reqs, &req->unode);
    }
    limiter_reload_run(rs, &reqs, req == NULL);
}

void limiter_reload_stop(struct limiter_reloads *rs)
{
    struct limiter_reload_job *job = rs->running;

    if (rs->stopping) {
        return;
    }
    rs->stopping = 1;
    if (rs->handles) {
        uv_close((uv_handle_t *)&rs->bind, NULL);
    }
    if (job != NULL && job->binding) {
        limiter_reload_end(job, "proxy shutting down");
    } else if (job != NULL) {
        /* Not started: its callback comes with UV_ECANCELED. Reading: it
         * ends when the read returns, sooner with a nudge. */
        if (uv_cancel((uv_req_t *)&job->work) != 0) {
            uv_timer_start(&rs->nudge, limiter_reload_on_nudge, 0,
                           LIMITER_RELOAD_NUDGE_MS);
        }
        limiter_reload_answer(&rs->next, "proxy shutting down");
        return;
    }
    limiter_reload_answer(&rs->next, "proxy shutting down");
    if (rs->handles) {
        uv_close((uv_handle_t *)&rs->nudge, NULL);
        rs->handles = 0;
    }
}
