/* The log queue and its writer thread.
 *
 * Producers append records under `qlock`; the writer takes the whole queue
 * at once, executes it without the lock, writes the appenders' buffers,
 * and only then counts the records as done, so "done" means "on disk (or
 * handed to the callback)". Sequence numbers make flush exact: it waits for
 * done >= the number queued when it was called.
 *
 * The queue is bounded in bytes. Fibers never wait for room (they drop and
 * count); plain threads do. Control records (appender changes, reopen) are
 * never dropped and not charged to the bound.
 *
 * The writer starts on first use. sp_log_shutdown() (also at exit) drains
 * and joins it; afterwards records execute on the calling thread under
 * `qlock`, which then stands in for the writer. fork() handlers drain the
 * queue before the fork and let the child start a writer of its own. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "log_internal.h"
#include "spindle/fiber.h"

enum { QUEUE_DEFAULT = 4 << 20, QUEUE_MIN = 4 << 10 };
typedef enum wstate { W_NONE, W_RUNNING, W_STOPPED } wstate_t;

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;  /* the writer waits */
static pthread_cond_t space = PTHREAD_COND_INITIALIZER; /* producers wait */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;  /* flushers wait */
static sp__log_record_t *head, *qtail;
static size_t queued, capacity = QUEUE_DEFAULT;
static uint64_t enq_seq, done_seq;
static wstate_t state;
static bool stopping, writer_waiting, busy;
static pthread_t writer;
static _Thread_local bool on_writer;
static pthread_once_t once = PTHREAD_ONCE_INIT;

bool sp__log_is_writer(void)
{
    return on_writer;
}

/* ---- executing ------------------------------------------------------------ */

/* What the loggers above hand over (log.c, before their first record). */
static _Atomic(const sp__log_writer_ops_t *) ops;

void sp__log_writer_set_ops(const sp__log_writer_ops_t *o)
{
    atomic_store(&ops, o);
}

/* Execute one record: run a control function, or write a message to its
 * logger's appenders. */
static void exec(sp__log_record_t *r)
{
    if (r->ctl) {
        sp__appenders_flush(); /* earlier lines first; see appender release */
        r->ctl(r->ctl_arg);
        return;
    }
    const sp__log_writer_ops_t *o = atomic_load(&ops);
    if (o)
        o->exec(r);
}

static void hold_loggers(bool hold)
{
    const sp__log_writer_ops_t *o = atomic_load(&ops);
    if (o)
        o->hold_loggers(hold);
}

/* Execute and free a chain of records, then write the buffers out. */
static uint64_t run(sp__log_record_t *r)
{
    uint64_t n = 0;
    while (r) {
        sp__log_record_t *next = r->next;
        exec(r);
        free(r);
        r = next;
        n++;
    }
    sp__appenders_flush();
    return n;
}

static void *writer_main(void *unused)
{
    (void)unused;
    on_writer = true;
    pthread_mutex_lock(&qlock);
    for (;;) {
        while (!head && !stopping) {
            writer_waiting = true;
            pthread_cond_wait(&more, &qlock);
            writer_waiting = false;
        }
        if (!head)
            break; /* stopping, and everything is written */
        sp__log_record_t *batch = head;
        head = qtail = NULL;
        queued = 0;
        busy = true;
        pthread_cond_broadcast(&space);
        pthread_mutex_unlock(&qlock);
        uint64_t n = run(batch);
        pthread_mutex_lock(&qlock);
        busy = false;
        done_seq += n;
        pthread_cond_broadcast(&done);
    }
    pthread_mutex_unlock(&qlock);
    return NULL;
}

/* ---- fork and exit ---------------------------------------------------------- */

/* Before fork: let the writer finish everything queued, and hold the
 * locks so nothing new comes in and no list is half-changed; the child then
 * has no half-written state. The writer needs the list locks while busy,
 * so they are taken once it is idle. */
static void before_fork(void)
{
    pthread_mutex_lock(&qlock);
    while (state == W_RUNNING && (head || busy))
        pthread_cond_wait(&done, &qlock);
    hold_loggers(true);
    sp__appenders_hold(true);
}

static void after_fork_parent(void)
{
    sp__appenders_hold(false);
    hold_loggers(false);
    pthread_mutex_unlock(&qlock);
}

/* The child has no writer thread: it starts its own on first use. The
 * condition variables still count the parent's writer as a waiter, and a
 * signal would wait for that ghost to wake: they are made anew. */
static void after_fork_child(void)
{
    if (state == W_RUNNING)
        state = W_NONE;
    stopping = writer_waiting = busy = false;
    pthread_cond_init(&more, NULL);
    pthread_cond_init(&space, NULL);
    pthread_cond_init(&done, NULL);
    after_fork_parent();
}

static void register_handlers(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(sp_log_shutdown);
}

/* Start the writer if needed; false means "execute here instead" (after
 * shutdown, or when no thread could be made). Called with qlock held. */
static bool writer_ready(void)
{
    if (state == W_RUNNING)
        return true;
    if (state == W_STOPPED)
        return false;
    pthread_once(&once, register_handlers);
    /* Signals belong to the application's threads, not to the writer. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&writer, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return false;
    pthread_setname_np(writer, "sp-log"); /* for top -H, gdb */
    state = W_RUNNING;
    return true;
}

/* Execute one record on this thread, as the writer would. qlock held. */
static void run_here(sp__log_record_t *r)
{
    r->next = NULL;
    run(r);
}

static void append(sp__log_record_t *r)
{
    r->next = NULL;
    if (qtail)
        qtail->next = r;
    else
        head = r;
    qtail = r;
    queued += r->size;
    enq_seq++;
    if (writer_waiting)
        pthread_cond_signal(&more);
}

/* ---- producers ---------------------------------------------------------- */

void sp__log_enqueue(sp__log_record_t *r)
{
    /* A fiber must not block its worker; the writer must not wait on
     * itself. */
    bool may_wait = !on_writer && !sp_fiber_current();
    if (on_writer) {
        free(r);
        sp__log_drop();
        return;
    }
    pthread_mutex_lock(&qlock);
    for (;;) {
        if (!writer_ready()) {
            run_here(r);
            break;
        }
        if (!queued || queued + r->size <= capacity) {
            append(r);
            break;
        }
        if (!may_wait) {
            free(r);
            sp__log_drop();
            break;
        }
        pthread_cond_wait(&space, &qlock);
    }
    pthread_mutex_unlock(&qlock);
}

int sp__log_control(sp_log_ctl_fn fn, void *arg)
{
    if (on_writer)
        return -EDEADLK;
    sp__log_record_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->ctl = fn;
    r->ctl_arg = arg;
    pthread_mutex_lock(&qlock);
    if (writer_ready()) {
        append(r);
        uint64_t seq = enq_seq;
        while (done_seq < seq)
            pthread_cond_wait(&done, &qlock);
    } else {
        run_here(r);
    }
    pthread_mutex_unlock(&qlock);
    return 0;
}

int sp_log_flush(void)
{
    if (on_writer)
        return -EDEADLK;
    pthread_mutex_lock(&qlock);
    uint64_t seq = enq_seq;
    while (done_seq < seq)
        pthread_cond_wait(&done, &qlock);
    pthread_mutex_unlock(&qlock);
    return 0;
}

static void reopen_ctl(void *arg)
{
    *(int *)arg = sp__appenders_reopen();
}

int sp_log_reopen(void)
{
    int result = 0;
    int rc = sp__log_control(reopen_ctl, &result);
    return rc < 0 ? rc : result;
}

static void set_default_ctl(void *arg)
{
    sp__appenders_set_default(arg);
}

int sp_log_set_pattern(const char *pattern, char *msg, size_t len)
{
    sp__log_pattern_t *p = sp__pattern_compile(pattern, msg, len);
    if (!p)
        return -errno;
    int rc = sp__log_control(set_default_ctl, p);
    if (rc < 0)
        sp__pattern_free(p);
    return rc;
}

int sp_log_set_queue_size(size_t bytes)
{
    if (bytes < QUEUE_MIN)
        return -EINVAL;
    pthread_mutex_lock(&qlock);
    capacity = bytes;
    pthread_cond_broadcast(&space);
    pthread_mutex_unlock(&qlock);
    return 0;
}

void sp_log_shutdown(void)
{
    if (on_writer)
        return;
    pthread_mutex_lock(&qlock);
    if (state != W_RUNNING || stopping) {
        /* Never started, already stopped, or another thread is stopping
         * it: wait for that to finish. */
        while (stopping)
            pthread_cond_wait(&done, &qlock);
        state = W_STOPPED;
        pthread_mutex_unlock(&qlock);
        return;
    }
    stopping = true;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&qlock);
    pthread_join(writer, NULL);
    pthread_mutex_lock(&qlock);
    state = W_STOPPED;
    stopping = false;
    /* Producers waiting for room now write for themselves. */
    pthread_cond_broadcast(&space);
    pthread_cond_broadcast(&done);
    pthread_mutex_unlock(&qlock);
}
