/* Loggers and the log call path.
 *
 * Loggers live for the whole process on one list, parents before children,
 * so one pass in list order recomputes every effective level after a
 * change. The hot path (sp_log_enabled) is one relaxed atomic load. A call
 * that passes formats its message right away (the arguments may not
 * outlive the call) into a record with the time, thread and fiber, and
 * queues it; the writer picks the logger's appenders when it writes. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log_internal.h"
#include "spindle/fiber.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the list */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static sp_logger_t root_logger = {.name = "root"};
static sp_logger_t *tail = &root_logger;

static void hold_loggers(bool hold);
static void exec_message(sp__log_record_t *r);
static sp__log_record_t *notice(const char *file, int line, const char *fmt, ...);
/* What the writer and the appenders below need of the loggers. */
static const sp__log_writer_ops_t writer_ops = {exec_message, hold_loggers};

static void init_root(void)
{
    sp__log_writer_set_ops(&writer_ops);
    sp__appenders_set_notice(notice);
    atomic_init(&root_logger.level, SP_LEVEL_INFO);
    atomic_init(&root_logger.effective, SP_LEVEL_INFO);
    /* The root writes to stderr until configured otherwise. */
    sp_log_appender_t *err = sp_log_stderr(NULL);
    if (err) {
        root_logger.apps = sp__appset_new(&err, 1);
        sp_log_appender_release(err);
    }
}

static void hold_loggers(bool hold)
{
    if (hold)
        pthread_mutex_lock(&lock);
    else
        pthread_mutex_unlock(&lock);
}

sp_logger_t *sp_log_root(void)
{
    pthread_once(&once, init_root);
    return &root_logger;
}

/* ---- levels -------------------------------------------------------------- */

static const char *const level_names[] = {"TRACE", "DEBUG", "INFO", "WARN",
                                          "ERROR", "FATAL", "OFF"};

const char *sp_log_level_name(sp_log_level_t level)
{
    return (unsigned)level <= SP_LEVEL_OFF ? level_names[level] : "?";
}

int sp_log_level_parse(const char *name, sp_log_level_t *out)
{
    for (int l = SP_LEVEL_TRACE; name && l <= SP_LEVEL_OFF; l++)
        if (strcasecmp(name, level_names[l]) == 0) {
            *out = (sp_log_level_t)l;
            return 0;
        }
    if (name && strcasecmp(name, "warning") == 0) {
        *out = SP_LEVEL_WARN;
        return 0;
    }
    return -EINVAL;
}

/* Recompute every effective level; list order puts parents first. */
static void recompute(void)
{
    for (sp_logger_t *l = &root_logger; l; l = l->next) {
        int own = atomic_load_explicit(&l->level, memory_order_relaxed);
        int eff = own != SP_LEVEL_INHERIT || !l->parent
                      ? own
                      : atomic_load_explicit(&l->parent->effective, memory_order_relaxed);
        atomic_store_explicit(&l->effective, eff, memory_order_relaxed);
    }
}

int sp_logger_set_level(sp_logger_t *lg, sp_log_level_t level)
{
    if (!lg || (unsigned)level > SP_LEVEL_INHERIT ||
        (level == SP_LEVEL_INHERIT && lg == sp_log_root()))
        return -EINVAL;
    pthread_mutex_lock(&lock);
    atomic_store_explicit(&lg->level, level, memory_order_relaxed);
    recompute();
    pthread_mutex_unlock(&lock);
    return 0;
}

sp_log_level_t sp_logger_level(const sp_logger_t *lg)
{
    if (!lg)
        lg = sp_log_root();
    return (sp_log_level_t)atomic_load_explicit(&lg->effective, memory_order_relaxed);
}

bool sp_log_enabled(const sp_logger_t *lg, sp_log_level_t level)
{
    return (int)level >= (int)sp_logger_level(lg) && level < SP_LEVEL_OFF;
}

/* ---- the registry ---------------------------------------------------------- */

const char *sp_logger_name(const sp_logger_t *lg)
{
    return lg ? lg->name : root_logger.name;
}

static sp_logger_t *find(const char *name, size_t len)
{
    for (sp_logger_t *l = root_logger.next; l; l = l->next)
        if (strncmp(l->name, name, len) == 0 && l->name[len] == '\0')
            return l;
    return NULL;
}

/* Find or make the logger named by the first len bytes of name, its
 * parents first. Called with the lock held. */
static sp_logger_t *get(const char *name, size_t len)
{
    sp_logger_t *l = find(name, len);
    if (l)
        return l;
    const char *dot = len ? memrchr(name, '.', len) : NULL;
    sp_logger_t *parent = dot ? get(name, (size_t)(dot - name)) : &root_logger;
    if (!parent || !(l = calloc(1, sizeof *l)))
        return NULL;
    if (!(l->name = strndup(name, len))) {
        free(l);
        return NULL;
    }
    l->parent = parent;
    atomic_init(&l->level, SP_LEVEL_INHERIT);
    atomic_init(&l->effective, atomic_load(&parent->effective));
    tail->next = l;
    tail = l;
    return l;
}

/* Dot-separated non-empty parts. */
static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && name[n - 1] != '.' && !strstr(name, "..");
}

sp_logger_t *sp_logger(const char *name)
{
    sp_logger_t *root = sp_log_root();
    if (!name || !*name || strcmp(name, "root") == 0)
        return root;
    if (!name_ok(name)) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    sp_logger_t *l = get(name, strlen(name));
    pthread_mutex_unlock(&lock);
    if (!l)
        errno = ENOMEM;
    return l;
}

/* ---- appenders of a logger -------------------------------------------------- */

typedef struct set_apps {
    sp_logger_t *lg;
    sp__log_appset_t *apps;
} set_apps_t;

static void set_apps_ctl(void *arg)
{
    set_apps_t *s = arg;
    sp__appset_free(s->lg->apps);
    s->lg->apps = s->apps;
}

int sp_logger_set_appenders(sp_logger_t *lg, sp_log_appender_t *const *apps, size_t n)
{
    if (!lg || (!apps && lg == sp_log_root()))
        return -EINVAL;
    for (size_t i = 0; apps && i < n; i++)
        if (!apps[i])
            return -EINVAL;
    set_apps_t s = {lg, NULL};
    if (apps && !(s.apps = sp__appset_new(apps, n)))
        return -ENOMEM;
    int rc = sp__log_control(set_apps_ctl, &s);
    if (rc < 0)
        sp__appset_free(s.apps);
    return rc;
}

/* ---- the call path ----------------------------------------------------------- */

/* Cached per thread, and checked against the process id: a child of
 * fork() has a new tid on the same thread-local slot. */
static long thread_id(void)
{
    static _Thread_local long tid;
    static _Thread_local pid_t pid;
    pid_t now = getpid();
    if (!tid || pid != now) {
        tid = (long)syscall(SYS_gettid);
        pid = now;
    }
    return tid;
}

/* A record for a message of len bytes (to be filled in), stamped now. */
static sp__log_record_t *record_new(sp_logger_t *lg, int level, const char *file,
                                  int line, size_t len)
{
    sp__log_record_t *r = malloc(sizeof *r + len + 1);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->msg[len] = '\0';
    r->len = len;
    r->size = sizeof *r + len + 1;
    r->logger = lg;
    r->level = level;
    r->file = file;
    r->line = line;
    clock_gettime(CLOCK_REALTIME, &r->ts);
    r->tid = thread_id();
    sp_fiber_t *f = sp_fiber_current();
    r->fid = f ? sp_fiber_id(f) : 0;
    return r;
}

sp__log_record_t *sp__log_record(sp_logger_t *lg, int level, const char *file, int line,
                                const char *fmt, va_list ap)
{
    /* Most messages fit the stack buffer: format once, copy once. */
    char small[512];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    size_t len = n < 0 ? 0 : (size_t)n;
    sp__log_record_t *r = record_new(lg, level, file, line, len);
    if (r && len < sizeof small)
        memcpy(r->msg, small, len);
    else if (r)
        vsnprintf(r->msg, len + 1, fmt, again);
    va_end(again);
    return r;
}

void sp_log_vwrite(sp_logger_t *lg, sp_log_level_t level, const char *file, int line,
                   const char *fmt, va_list ap)
{
    if (!lg)
        lg = sp_log_root();
    if ((unsigned)level >= SP_LEVEL_OFF || !fmt)
        return;
    sp__log_record_t *r = sp__log_record(lg, level, file, line, fmt, ap);
    if (!r) {
        sp__log_drop();
        return;
    }
    sp__log_enqueue(r);
    if (level == SP_LEVEL_FATAL)
        sp_log_flush(); /* the process is probably about to die */
}

void sp_log_write(sp_logger_t *lg, sp_log_level_t level, const char *file, int line,
                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sp_log_vwrite(lg, level, file, line, fmt, ap);
    va_end(ap);
}

/* ---- executing a record (writer state) ------------------------------------- */

static sp__log_record_t *notice(const char *file, int line, const char *fmt, ...)
{
    static sp_logger_t *self;
    if (!self)
        self = sp_logger("spindle.log");
    if (!self)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    sp__log_record_t *r = sp__log_record(self, SP_LEVEL_WARN, file, line, fmt, ap);
    va_end(ap);
    return r;
}

/* Write a message record to its logger's appenders. */
static void emit(const sp__log_record_t *r)
{
    const sp_logger_t *l = r->logger;
    while (!l->apps && l->parent)
        l = l->parent;
    for (size_t i = 0; l->apps && i < l->apps->n; i++)
        sp__appender_emit(l->apps->a[i], r);
}

/* Tell the log itself about messages the queue dropped. */
static void report_drops(void)
{
    uint64_t n = sp__log_take_unreported();
    if (!n || !sp_log_enabled(sp_logger("spindle.log"), SP_LEVEL_WARN))
        return;
    sp__log_record_t *r = notice(__FILE__, __LINE__,
                                 "%llu messages dropped (log queue full)",
                                 (unsigned long long)n);
    if (r) {
        emit(r);
        free(r);
    }
}

/* Write a message record to its logger's appenders. */

/* The writer's part for a message record (sp__log_writer_ops_t). */
static void exec_message(sp__log_record_t *r)
{
    report_drops();
    emit(r);
}
