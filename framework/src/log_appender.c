/* Appenders: where formatted lines go. Console and file appenders gather a
 * batch of lines in a buffer and write it with plain write(2) at the end of
 * the batch (or every FLUSH_AT bytes); the writer is a plain thread, so
 * with the hooks linked in these are the libc calls.
 *
 * Every live appender is on one list (under `lock`) so reopen and flush can
 * find them. Appenders are reference counted: a logger's appender set holds
 * one reference per appender, and the creator holds one. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log_internal.h"

enum { FLUSH_AT = 64 * 1024 };

typedef enum kind { APP_FD, APP_FILE, APP_CALLBACK } kind_t;

struct sp_log_appender {
    _Atomic int refs;
    kind_t kind;
    int fd;
    char *path;
    sp_log_pattern_t *pattern; /* NULL: the default pattern */
    sp_log_sink_fn fn;
    void *arg;
    sp_lbuf_t buf; /* writer state */
    sp_log_appender_t *prev, *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sp_log_appender_t *all;
static sp_log_pattern_t *default_pattern; /* writer state */
static sp_lbuf_t scratch;                 /* writer state: callback lines */

void sp__appenders_hold(bool hold)
{
    if (hold)
        pthread_mutex_lock(&lock);
    else
        pthread_mutex_unlock(&lock);
}

/* ---- life cycle ---------------------------------------------------------- */

static sp_log_appender_t *create(kind_t kind, int fd, const char *pattern)
{
    sp_log_appender_t *a = calloc(1, sizeof *a);
    if (!a) {
        errno = ENOMEM;
        return NULL;
    }
    atomic_init(&a->refs, 1);
    a->kind = kind;
    a->fd = fd;
    if (pattern && !(a->pattern = sp__pattern_compile(pattern, NULL, 0))) {
        int e = errno;
        free(a);
        errno = e;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    a->next = all;
    if (all)
        all->prev = a;
    all = a;
    pthread_mutex_unlock(&lock);
    return a;
}

sp_log_appender_t *sp_log_stdout(const char *pattern)
{
    return create(APP_FD, STDOUT_FILENO, pattern);
}

sp_log_appender_t *sp_log_stderr(const char *pattern)
{
    return create(APP_FD, STDERR_FILENO, pattern);
}

static int open_log(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

sp_log_appender_t *sp_log_file(const char *path, const char *pattern)
{
    if (!path || !*path) {
        errno = EINVAL;
        return NULL;
    }
    char *copy = strdup(path);
    int fd = copy ? open_log(path) : -1;
    int e = copy ? errno : ENOMEM;
    sp_log_appender_t *a = fd >= 0 ? create(APP_FILE, fd, pattern) : NULL;
    if (a) {
        a->path = copy;
        return a;
    }
    e = fd >= 0 ? errno : e;
    if (fd >= 0)
        close(fd);
    free(copy);
    errno = e;
    return NULL;
}

sp_log_appender_t *sp_log_callback(sp_log_sink_fn fn, void *arg, const char *pattern)
{
    if (!fn) {
        errno = EINVAL;
        return NULL;
    }
    sp_log_appender_t *a = create(APP_CALLBACK, -1, pattern);
    if (a) {
        a->fn = fn;
        a->arg = arg;
    }
    return a;
}

void sp__appender_retain(sp_log_appender_t *a)
{
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
}

void sp_log_appender_release(sp_log_appender_t *a)
{
    if (!a || atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_lock(&lock);
    if (a->prev)
        a->prev->next = a->next;
    else
        all = a->next;
    if (a->next)
        a->next->prev = a->prev;
    pthread_mutex_unlock(&lock);
    /* Its buffer is empty: the writer flushes before any control record,
     * and only control records drop the references it writes through. */
    if (a->kind == APP_FILE)
        close(a->fd);
    sp__pattern_free(a->pattern);
    free(a->buf.data);
    free(a->path);
    free(a);
}

/* ---- appender sets ------------------------------------------------------ */

sp_log_appset_t *sp__appset_new(sp_log_appender_t *const *apps, size_t n)
{
    sp_log_appset_t *s = malloc(sizeof *s + n * sizeof s->a[0]);
    if (!s)
        return NULL;
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        s->a[i] = apps[i];
        sp__appender_retain(apps[i]);
    }
    return s;
}

void sp__appset_free(sp_log_appset_t *s)
{
    for (size_t i = 0; s && i < s->n; i++)
        sp_log_appender_release(s->a[i]);
    free(s);
}

/* ---- writing (writer state) ----------------------------------------------- */

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* disk full or closed: nothing better to do than drop */
        p += w;
        n -= (size_t)w;
    }
}

static void flush_one(sp_log_appender_t *a)
{
    if (a->buf.len)
        write_all(a->fd, a->buf.data, a->buf.len);
    a->buf.len = 0;
}

void sp__appenders_set_default(sp_log_pattern_t *p)
{
    sp__pattern_free(default_pattern);
    default_pattern = p;
}

static sp_log_pattern_t *pattern_of(const sp_log_appender_t *a)
{
    if (a->pattern)
        return a->pattern;
    if (!default_pattern)
        default_pattern = sp__pattern_compile(SP_LOG_DEFAULT_PATTERN, NULL, 0);
    return default_pattern;
}

void sp__appender_emit(sp_log_appender_t *a, const sp_log_record_t *r)
{
    sp_log_pattern_t *p = pattern_of(a);
    sp_lbuf_t *out = a->kind == APP_CALLBACK ? &scratch : &a->buf;
    size_t before = out->len;
    /* A callback's line is NUL-terminated as well. */
    if (!p || !sp__pattern_format(p, r, out) ||
        (a->kind == APP_CALLBACK && !sp__lbuf_put(out, "", 1))) {
        out->len = before;
        sp__log_drop();
        return;
    }
    if (a->kind == APP_CALLBACK) {
        a->fn(out->data, out->len - 1, a->arg);
        out->len = 0;
    } else if (out->len >= FLUSH_AT) {
        flush_one(a);
    }
}

void sp__appenders_flush(void)
{
    pthread_mutex_lock(&lock);
    for (sp_log_appender_t *a = all; a; a = a->next)
        if (a->kind != APP_CALLBACK)
            flush_one(a);
    pthread_mutex_unlock(&lock);
}

int sp__appenders_reopen(void)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    for (sp_log_appender_t *a = all; a; a = a->next) {
        if (a->kind != APP_FILE)
            continue;
        flush_one(a); /* what was logged before goes to the old file */
        int fd = open_log(a->path);
        if (fd < 0) {
            rc = rc ? rc : -errno;
            continue;
        }
        close(a->fd);
        a->fd = fd;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}
