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
#include <sys/stat.h>
#include <unistd.h>

#include "base/list.h"
#include "log_internal.h"

enum { FLUSH_AT = 64 * 1024 };

typedef enum kind { APP_FD, APP_FILE, APP_CALLBACK } kind_t;

struct sp_log_appender {
    _Atomic int refs;
    kind_t kind;
    int fd;
    char *path;
    sp__log_pattern_t *pattern; /* NULL: the default pattern */
    sp_log_sink_fn fn;
    void *arg;
    sp__lbuf_t buf; /* writer state */
    uint64_t lost; /* writer state: lines lost here and not yet said here */
    int err;       /* writer state: why the last of them was lost */
    sp__link_t link; /* in `all` */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sp__list_t all; /* every appender, under `lock` */

static sp_log_appender_t *appender_of(sp__link_t *l)
{
    return sp__list_entry(l, sp_log_appender_t, link);
}
static sp__log_pattern_t *default_pattern; /* writer state */
static sp__lbuf_t scratch;                 /* writer state: callback lines */

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
    sp__list_push_front(&all, &a->link);
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
    sp__list_remove(&all, &a->link);
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

sp__log_appset_t *sp__appset_new(sp_log_appender_t *const *apps, size_t n)
{
    sp__log_appset_t *s = malloc(sizeof *s + n * sizeof s->a[0]);
    if (!s)
        return NULL;
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        s->a[i] = apps[i];
        sp__appender_retain(apps[i]);
    }
    return s;
}

void sp__appset_free(sp__log_appset_t *s)
{
    for (size_t i = 0; s && i < s->n; i++)
        sp_log_appender_release(s->a[i]);
    free(s);
}

/* ---- writing (writer state) ----------------------------------------------- */

void sp__appenders_set_default(sp__log_pattern_t *p)
{
    sp__pattern_free(default_pattern);
    default_pattern = p;
}

static sp__log_pattern_t *pattern_of(const sp_log_appender_t *a)
{
    if (a->pattern)
        return a->pattern;
    if (!default_pattern)
        default_pattern = sp__pattern_compile(SP_LOG_DEFAULT_PATTERN, NULL, 0);
    return default_pattern;
}

/* Write p[0..n); 0, or the errno that stopped it after *done bytes. */
static int write_all(int fd, const char *p, size_t n, size_t *done)
{
    *done = 0;
    while (*done < n) {
        ssize_t w = write(fd, p + *done, n - *done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        *done += (size_t)w;
    }
    return 0;
}

static size_t count_lines(const char *p, size_t n)
{
    size_t lines = 0;
    for (const char *end = p + n; (p = memchr(p, '\n', (size_t)(end - p))); p++)
        lines++;
    return lines;
}

/* A write that failed inside a line left part of it in the file: cut the
 * file back to its last whole line. Only a regular file can be; on a pipe
 * or terminal the part stays (they fail only when their reader is gone). */
static void take_back(int fd, size_t part)
{
    struct stat st;
    if (!part || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    off_t end = lseek(fd, 0, SEEK_CUR);
    if (end >= (off_t)part && ftruncate(fd, end - (off_t)part) < 0)
        sp__log_write_failed(0, errno); /* the part stays */
}

/* Write p[0..n), whose first `note` bytes are the "lines lost" note. When
 * the write fails, the lines that did not get out whole are lost: counted
 * (the note itself not), and the part of a cut line taken back. */
static void put_lines(sp_log_appender_t *a, const char *p, size_t n, size_t note)
{
    size_t done;
    int err = write_all(a->fd, p, n, &done);
    const char *nl = err ? memrchr(p, '\n', done) : NULL;
    size_t whole = !err ? n : nl ? (size_t)(nl + 1 - p) : 0;
    if (note && whole >= note)
        a->lost = 0; /* said in the file */
    if (!err)
        return;
    take_back(a->fd, done - whole);
    size_t from = whole > note ? whole : note;
    size_t lines = count_lines(p + from, n - from);
    a->lost += lines;
    a->err = err;
    sp__log_write_failed(lines, err);
}

/* How the loggers above make the log's own WARN record (log.c). */
static _Atomic(sp__log_notice_fn) notice;

void sp__appenders_set_notice(sp__log_notice_fn fn)
{
    atomic_store(&notice, fn);
}

/* Lay out "N log lines lost (reason)" at the end of `out`; false when it
 * cannot (out of memory, or no loggers yet). */
static bool lost_note(const sp_log_appender_t *a, sp__lbuf_t *out)
{
    sp__log_notice_fn make = atomic_load(&notice);
    sp__log_record_t *r = make ? make(__FILE__, __LINE__, "%llu log lines lost (%s)",
                                      (unsigned long long)a->lost, strerror(a->err))
                               : NULL;
    sp__log_pattern_t *p = pattern_of(a);
    bool ok = r && p && sp__pattern_format(p, r, out);
    free(r);
    return ok;
}

/* Write the buffered lines; after a loss, with the note in front of them
 * (one write: the note is in the file exactly when writing works again). */
static void flush_one(sp_log_appender_t *a)
{
    if (!a->buf.len)
        return;
    const sp__lbuf_t *out = &a->buf;
    size_t note = 0;
    if (a->lost && !sp_log_enabled(sp_logger("spindle.log"), SP_LEVEL_WARN))
        a->lost = 0; /* the log's notes about itself are turned off */
    if (a->lost && lost_note(a, &scratch)) {
        note = scratch.len;
        if (sp__lbuf_put(&scratch, a->buf.data, a->buf.len))
            out = &scratch;
        else
            note = 0;
    }
    put_lines(a, out->data, out->len, note);
    scratch.len = 0;
    a->buf.len = 0;
}

void sp__appender_emit(sp_log_appender_t *a, const sp__log_record_t *r)
{
    sp__log_pattern_t *p = pattern_of(a);
    sp__lbuf_t *out = a->kind == APP_CALLBACK ? &scratch : &a->buf;
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
    for (sp__link_t *l = all.head; l; l = l->next)
        if (appender_of(l)->kind != APP_CALLBACK)
            flush_one(appender_of(l));
    pthread_mutex_unlock(&lock);
}

int sp__appenders_reopen(void)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    for (sp__link_t *l = all.head; l; l = l->next) {
        sp_log_appender_t *a = appender_of(l);
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
