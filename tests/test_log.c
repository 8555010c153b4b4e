/* Logging: exact pattern output, levels and inheritance, appenders, file
 * reopen after rotation, a full disk, the full-queue policy (fibers drop, threads wait),
 * no loss at shutdown or exit with many threads and fibers, fork, and
 * configuration from YAML. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/config.h>
#include <spindle/fiber.h>
#include <spindle/iomanager.h>
#include <spindle/log.h>

#include "testutil.h"

/* ---- capture: a callback appender collecting lines -------------------------- */

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static char captured[1 << 16];
static size_t captured_len;
static int captured_lines;

static void capture(const char *line, size_t len, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cap_lock);
    if (captured_len + len < sizeof captured) {
        memcpy(captured + captured_len, line, len);
        captured_len += len;
        captured[captured_len] = '\0';
    }
    captured_lines++;
    pthread_mutex_unlock(&cap_lock);
}

static const char *take_captured(void)
{
    static char out[sizeof captured];
    ck_assert_int_eq(sp_log_flush(), 0);
    pthread_mutex_lock(&cap_lock);
    memcpy(out, captured, captured_len + 1);
    captured_len = 0;
    captured[0] = '\0';
    pthread_mutex_unlock(&cap_lock);
    return out;
}

/* Route `lg` to a fresh capture appender with `pattern`. */
static void capture_logger(sp_logger_t *lg, const char *pattern)
{
    sp_log_appender_t *a = sp_log_callback(capture, NULL, pattern);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(sp_logger_set_appenders(lg, &a, 1), 0);
    sp_log_appender_release(a);
}

static char dir[64];

static void make_dir(void)
{
    strcpy(dir, "/tmp/sp_log_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *path_in_dir(const char *name)
{
    static char p[4][256];
    static int next;
    char *out = p[next++ % 4];
    snprintf(out, 256, "%s/%s", dir, name);
    return out;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static long count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long n = 0;
    for (int c; (c = fgetc(f)) != EOF;)
        n += c == '\n';
    fclose(f);
    return n;
}

/* ---- patterns ---------------------------------------------------------------- */

static int fiber_line;

static void log_from_fiber(void *arg)
{
    fiber_line = __LINE__ + 1;
    SP_LOG_WARN((sp_logger_t *)arg, "in fiber %d", 7);
}

START_TEST(pattern_exact_output)
{
    sp_logger_t *lg = sp_logger("app.core");
    ck_assert_ptr_nonnull(lg);
    capture_logger(lg, "[%p] %c %t/%F %f:%l %m%n");
    long tid = (long)syscall(SYS_gettid);

    int line = __LINE__ + 1;
    SP_LOG_INFO(lg, "hello %s", "world");
    char want[256];
    snprintf(want, sizeof want, "[INFO] app.core %ld/0 test_log.c:%d hello world\n", tid, line);
    ck_assert_str_eq(take_captured(), want);

    sp_fiber_t *f = sp_fiber_create(log_from_fiber, lg, 0, "logger");
    ck_assert_int_eq(sp_fiber_resume(f), 0);
    snprintf(want, sizeof want, "[WARN] app.core %ld/%llu test_log.c:%d in fiber 7\n", tid,
             (unsigned long long)sp_fiber_id(f), fiber_line);
    ck_assert_str_eq(take_captured(), want);
    sp_fiber_destroy(f);
}
END_TEST

START_TEST(pattern_widths_time_and_escapes)
{
    sp_logger_t *lg = sp_logger("w");
    capture_logger(lg, "%-5p|%5p|%8c|%-3c|100%%|%m%n");
    SP_LOG_INFO(lg, "x");
    ck_assert_str_eq(take_captured(), "INFO | INFO|       w|w  |100%|x\n");

    capture_logger(lg, "%d{%Y}|%d|%q|%Q|%m");
    time_t before = time(NULL);
    SP_LOG_ERROR(lg, "t");
    const char *got = take_captured();
    struct tm tm;
    localtime_r(&before, &tm);
    char year[8];
    strftime(year, sizeof year, "%Y", &tm);
    ck_assert_int_eq(strncmp(got, year, 4), 0);
    /* "YYYY|YYYY-MM-DD HH:MM:SS|mmm|uuuuuu|t" */
    ck_assert_uint_eq(strlen(got), 4 + 1 + 19 + 1 + 3 + 1 + 6 + 2);
    ck_assert_int_eq(got[4 + 1 + 4], '-');
    ck_assert_int_eq(strncmp(got + 4 + 1 + 19 + 1, got + 4 + 1 + 19 + 1 + 4, 3), 0);
    ck_assert_str_eq(got + strlen(got) - 2, "|t");
}
END_TEST

START_TEST(pattern_errors)
{
    char msg[256];
    ck_assert_int_eq(sp_log_set_pattern("%m %x%n", msg, sizeof msg), -EINVAL);
    ck_assert_str_eq(msg, "unknown pattern item '%x%' (known: %d %q %Q %p %c %t %F %f %l "
                          "%m %n %%)");
    ck_assert_int_eq(sp_log_set_pattern("%d{%Y", msg, sizeof msg), -EINVAL);
    ck_assert_str_eq(msg, "unterminated %d{");
    ck_assert_int_eq(sp_log_set_pattern("50%", msg, sizeof msg), -EINVAL);
    errno = 0;
    ck_assert_ptr_null(sp_log_stdout("%z"));
    ck_assert_int_eq(errno, EINVAL);

    /* The default pattern applies to appenders created without one. */
    ck_assert_int_eq(sp_log_set_pattern("<%m>%n", msg, sizeof msg), 0);
    sp_logger_t *lg = sp_logger("d");
    capture_logger(lg, NULL);
    SP_LOG_INFO(lg, "plain");
    ck_assert_str_eq(take_captured(), "<plain>\n");
}
END_TEST

/* ---- levels and inheritance ---------------------------------------------------- */

static int evaluated;

static int side_effect(void)
{
    return ++evaluated;
}

START_TEST(levels_and_inheritance)
{
    sp_logger_t *root = sp_log_root(), *http = sp_logger("http");
    sp_logger_t *access = sp_logger("http.access"), *deep = sp_logger("http.access.x");
    ck_assert_ptr_eq(sp_logger(NULL), root);
    ck_assert_ptr_eq(sp_logger("root"), root);
    ck_assert_ptr_eq(sp_logger("http"), http);
    ck_assert_str_eq(sp_logger_name(access), "http.access");
    ck_assert_ptr_null(sp_logger("a..b"));
    ck_assert_int_eq(errno, EINVAL);

    ck_assert_int_eq(sp_logger_level(deep), SP_LEVEL_INFO); /* root's default */
    ck_assert(!sp_log_enabled(access, SP_LEVEL_DEBUG));
    ck_assert_int_eq(sp_logger_set_level(http, SP_LEVEL_DEBUG), 0);
    ck_assert_int_eq(sp_logger_level(deep), SP_LEVEL_DEBUG);
    ck_assert_int_eq(sp_logger_set_level(access, SP_LEVEL_ERROR), 0);
    ck_assert_int_eq(sp_logger_level(deep), SP_LEVEL_ERROR);
    ck_assert_int_eq(sp_logger_level(http), SP_LEVEL_DEBUG);
    ck_assert_int_eq(sp_logger_set_level(access, SP_LEVEL_INHERIT), 0);
    ck_assert_int_eq(sp_logger_level(deep), SP_LEVEL_DEBUG);
    ck_assert_int_eq(sp_logger_set_level(root, SP_LEVEL_INHERIT), -EINVAL);
    ck_assert_int_eq(sp_logger_set_level(root, SP_LEVEL_OFF), 0);
    ck_assert(!sp_log_enabled(root, SP_LEVEL_FATAL));
    ck_assert(sp_log_enabled(deep, SP_LEVEL_DEBUG)); /* http's own level wins */

    /* Appenders: inherited from the nearest ancestor that has some. */
    capture_logger(root, "root:%c:%m%n");
    capture_logger(http, "http:%c:%m%n");
    SP_LOG_INFO(deep, "a");
    SP_LOG_FATAL(root, "muted");
    ck_assert_str_eq(take_captured(), "http:http.access.x:a\n");
    capture_logger(access, "access:%c:%m%n");
    SP_LOG_INFO(deep, "b");
    SP_LOG_INFO(http, "c");
    ck_assert_str_eq(take_captured(), "access:http.access.x:b\nhttp:http:c\n");
    ck_assert_int_eq(sp_logger_set_appenders(access, NULL, 0), 0); /* inherit again */
    SP_LOG_INFO(deep, "d");
    ck_assert_str_eq(take_captured(), "http:http.access.x:d\n");
    sp_log_appender_t *none[1];
    ck_assert_int_eq(sp_logger_set_appenders(http, none, 0), 0); /* silenced */
    SP_LOG_INFO(deep, "e");
    ck_assert_str_eq(take_captured(), "");
    ck_assert_int_eq(sp_logger_set_appenders(root, NULL, 0), -EINVAL);

    /* A disabled level does not evaluate the arguments. */
    evaluated = 0;
    SP_LOG_TRACE(deep, "%d", side_effect());
    ck_assert_int_eq(evaluated, 0);
    SP_LOG_DEBUG(deep, "%d", side_effect());
    ck_assert_int_eq(evaluated, 1);

    sp_log_level_t l;
    ck_assert_int_eq(sp_log_level_parse("Warning", &l), 0);
    ck_assert_int_eq(l, SP_LEVEL_WARN);
    ck_assert_int_eq(sp_log_level_parse("loud", &l), -EINVAL);
    ck_assert_str_eq(sp_log_level_name(SP_LEVEL_FATAL), "FATAL");
}
END_TEST

/* ---- files and rotation ------------------------------------------------------- */

/* Route the logger `name` to a new file appender on `path`. */
static sp_logger_t *file_logger(const char *name, const char *path, const char *pattern)
{
    sp_log_appender_t *f = sp_log_file(path, pattern);
    ck_assert_ptr_nonnull(f);
    sp_logger_t *lg = sp_logger(name);
    ck_assert_int_eq(sp_logger_set_appenders(lg, &f, 1), 0);
    sp_log_appender_release(f);
    return lg;
}

START_TEST(file_appender_reopen_after_rename)
{
    make_dir();
    const char *path = path_in_dir("app.log"), *rotated = path_in_dir("app.log.1");
    sp_logger_t *lg = file_logger("rot", path, "%p %m%n");
    for (int i = 0; i < 3; i++)
        SP_LOG_INFO(lg, "before %d", i);
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_int_eq(rename(path, rotated), 0);
    SP_LOG_INFO(lg, "late"); /* logged before the reopen: old file */
    ck_assert_int_eq(sp_log_reopen(), 0);
    SP_LOG_WARN(lg, "after");
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_str_eq(slurp(rotated), "INFO before 0\nINFO before 1\nINFO before 2\nINFO late\n");
    ck_assert_str_eq(slurp(path), "WARN after\n");
    /* FATAL is on disk when the call returns, without a flush. */
    SP_LOG_FATAL(lg, "dying");
    ck_assert_str_eq(slurp(path), "WARN after\nFATAL dying\n");

    /* A reopen that fails keeps the old file and says why. */
    ck_assert_int_eq(rename(path, rotated), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "chmod 500 %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    int rc = sp_log_reopen();
    snprintf(cmd, sizeof cmd, "chmod 700 %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    if (geteuid() != 0) /* root ignores the permission */
        ck_assert_int_eq(rc, -EACCES);
    errno = 0;
    ck_assert_ptr_null(sp_log_file(path_in_dir("no/such/dir.log"), NULL));
    ck_assert_int_eq(errno, ENOENT);
    remove_dir();
}
END_TEST

/* ---- a full disk: whole lines only, counted, and said once writing works -------- */

/* The file size limit stands in for a full disk: writes past it fail
 * with EFBIG (SIGXFSZ ignored), and one that starts below it is cut. */
static void limit_file_size(rlim_t bytes)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
    rl.rlim_cur = bytes;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

START_TEST(full_disk_loses_whole_lines_and_says_so)
{
    make_dir();
    signal(SIGXFSZ, SIG_IGN);
    const char *path = path_in_dir("full.log");
    sp_logger_t *lg = file_logger("full", path, "%m%n");
    SP_LOG_INFO(lg, "first");
    ck_assert_int_eq(sp_log_flush(), 0);
    /* Room for "first\n", "line 0\n" and half of "line 1\n". */
    limit_file_size(6 + 7 + 3);
    for (int i = 0; i < 5; i++)
        SP_LOG_INFO(lg, "line %d", i);
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_str_eq(slurp(path), "first\nline 0\n"); /* no half line */
    sp_log_stats_t st;
    sp_log_stats(&st);
    ck_assert_uint_eq(st.lost, 4);
    ck_assert_uint_ge(st.write_errors, 1);
    ck_assert_int_eq(st.last_error, EFBIG);
    SP_LOG_INFO(lg, "still full");
    ck_assert_int_eq(sp_log_flush(), 0);
    sp_log_stats(&st);
    ck_assert_uint_eq(st.lost, 5);
    /* Space again: the file says what it misses, once, then goes on. */
    limit_file_size(RLIM_INFINITY);
    SP_LOG_INFO(lg, "back");
    SP_LOG_INFO(lg, "and on");
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_str_eq(slurp(path), "first\nline 0\n5 log lines lost (File too large)\n"
                                  "back\nand on\n");
    sp_log_stats(&st);
    ck_assert_uint_eq(st.lost, 5);
    remove_dir();
}
END_TEST

/* /dev/full fails every write with ENOSPC: each line counts once. */
START_TEST(dev_full_counts_every_line)
{
    sp_logger_t *lg = file_logger("devfull", "/dev/full", NULL);
    for (int i = 0; i < 10; i++)
        SP_LOG_INFO(lg, "into nothing %d", i);
    ck_assert_int_eq(sp_log_flush(), 0);
    sp_log_stats_t st;
    sp_log_stats(&st);
    ck_assert_uint_eq(st.lost, 10);
    ck_assert_uint_ge(st.write_errors, 1);
    ck_assert_int_eq(st.last_error, ENOSPC);
    ck_assert_uint_eq(st.dropped, 0);
}
END_TEST

/* ---- the full queue: fibers drop, threads wait ------------------------------------ */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static _Atomic int gate_waiting;
static _Atomic int thread_lines;

static void gated(const char *line, size_t len, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate_lock);
    atomic_store(&gate_waiting, 1);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
    if (strstr(line, "thread message"))
        atomic_fetch_add(&thread_lines, 1);
    capture(line, len, NULL);
}

enum { FIBER_MSGS = 2000, THREAD_MSGS = 300 };

static void flood_from_fiber(void *arg)
{
    for (int i = 0; i < FIBER_MSGS; i++)
        SP_LOG_INFO((sp_logger_t *)arg, "fiber message %d with some padding to fill the queue", i);
}

static _Atomic int thread_done;

static void *flood_from_thread(void *arg)
{
    for (int i = 0; i < THREAD_MSGS; i++)
        SP_LOG_INFO((sp_logger_t *)arg, "thread message %d with some padding to fill it", i);
    atomic_store(&thread_done, 1);
    return NULL;
}

START_TEST(full_queue_fibers_drop_threads_wait)
{
    sp_logger_t *lg = sp_logger("flood");
    sp_log_appender_t *a = sp_log_callback(gated, NULL, "%c %m%n");
    ck_assert_int_eq(sp_logger_set_appenders(lg, &a, 1), 0);
    ck_assert_int_eq(sp_logger_set_appenders(sp_log_root(), &a, 1), 0);
    sp_log_appender_release(a);
    ck_assert_int_eq(sp_log_set_queue_size(4096), 0);
    ck_assert_int_eq(sp_log_set_queue_size(100), -EINVAL);

    /* The writer blocks in the appender on the first line... */
    SP_LOG_INFO(lg, "first");
    while (!atomic_load(&gate_waiting))
        sched_yield();
    /* ... so a fiber fills the queue and must drop, never wait. */
    sp_fiber_t *f = sp_fiber_create(flood_from_fiber, lg, 0, "flood");
    ck_assert_int_eq(sp_fiber_resume(f), 0);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_DONE);
    sp_fiber_destroy(f);
    uint64_t dropped = sp_log_dropped();
    ck_assert_uint_gt(dropped, FIBER_MSGS / 2);

    /* A plain thread waits for room instead. */
    pthread_t t;
    atomic_store(&thread_done, 0);
    ck_assert_int_eq(pthread_create(&t, NULL, flood_from_thread, lg), 0);
    usleep(100 * 1000);
    ck_assert_int_eq(atomic_load(&thread_done), 0);
    pthread_mutex_lock(&gate_lock);
    gate_open = true;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
    pthread_join(t, NULL);
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_int_eq(atomic_load(&thread_lines), THREAD_MSGS);
    ck_assert_uint_eq(sp_log_dropped(), dropped);
    /* The writer tells the log about the drops. */
    SP_LOG_INFO(lg, "next");
    const char *got = take_captured();
    char want[96];
    snprintf(want, sizeof want, "spindle.log %llu messages dropped (log queue full)\n",
             (unsigned long long)dropped);
    ck_assert_msg(strstr(got, want) != NULL, "no drop report in %.200s", got);
}
END_TEST

/* ---- no loss ------------------------------------------------------------------------ */

enum { THREADS = 4, PER_THREAD = 5000, FIBERS = 200, PER_FIBER = 50 };

static void *thread_writer(void *arg)
{
    for (int i = 0; i < PER_THREAD; i++)
        SP_LOG_INFO((sp_logger_t *)arg, "thread line %d", i);
    return NULL;
}

static void fiber_writer(void *arg)
{
    for (int i = 0; i < PER_FIBER; i++) {
        SP_LOG_INFO((sp_logger_t *)arg, "fiber line %d", i);
        if (i % 10 == 0)
            sp_yield();
    }
}

START_TEST(no_loss_at_shutdown)
{
    make_dir();
    const char *path = path_in_dir("all.log");
    sp_log_appender_t *f = sp_log_file(path, "%t/%F %m%n");
    sp_logger_t *lg = sp_logger("many");
    ck_assert_int_eq(sp_logger_set_appenders(lg, &f, 1), 0);
    sp_log_appender_release(f);
    ck_assert_int_eq(sp_log_set_queue_size(256u << 20), 0); /* room for all */

    sp_iomanager_t *io = sp_iomanager_create("log", 4, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    for (int i = 0; i < FIBERS; i++)
        ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), fiber_writer, lg,
                                     SP_ANY_WORKER), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, thread_writer, lg), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);

    sp_log_shutdown();
    ck_assert_uint_eq(sp_log_dropped(), 0);
    ck_assert_int_eq(count_lines(path), THREADS * PER_THREAD + FIBERS * PER_FIBER);
    /* After shutdown the caller writes for itself. */
    SP_LOG_INFO(lg, "after shutdown");
    ck_assert_int_eq(count_lines(path), THREADS * PER_THREAD + FIBERS * PER_FIBER + 1);
    remove_dir();
}
END_TEST

START_TEST(exit_writes_everything)
{
    make_dir();
    const char *path = path_in_dir("exit.log");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        sp_log_appender_t *f = sp_log_file(path, "%m%n");
        sp_logger_set_appenders(sp_log_root(), &f, 1);
        for (int i = 0; i < 20000; i++)
            SP_LOG_INFO(NULL, "line %d", i);
        exit(0); /* no flush: atexit must do it */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(count_lines(path), 20000);
    remove_dir();
}
END_TEST

START_TEST(fork_child_has_its_own_writer)
{
    make_dir();
    const char *path = path_in_dir("fork.log");
    sp_log_appender_t *f = sp_log_file(path, "%m%n");
    ck_assert_int_eq(sp_logger_set_appenders(sp_log_root(), &f, 1), 0);
    sp_log_appender_release(f);
    for (int i = 0; i < 1000; i++)
        SP_LOG_INFO(NULL, "parent before %d", i);
    pid_t pid = fork(); /* the queue is drained first */
    ck_assert_int_ge(pid, 0);
    /* TSan cannot start threads in the child of a threaded process: there
     * the child only checks that it inherited nothing to write. */
#ifdef SP_TSAN
    enum { CHILD_LINES = 0 };
#else
    enum { CHILD_LINES = 1000 };
#endif
    if (pid == 0) {
        for (int i = 0; i < CHILD_LINES; i++)
            SP_LOG_INFO(NULL, "child %d", i);
        ck_assert_int_eq(sp_log_flush(), 0);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    SP_LOG_INFO(NULL, "parent after");
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_int_eq(count_lines(path), 1000 + CHILD_LINES + 1);
    remove_dir();
}
END_TEST

/* ---- configuration ----------------------------------------------------------------- */

static sp_config_t *cfg;

static void cfg_setup(void)
{
    make_dir();
    cfg = sp_config_create();
    ck_assert_int_eq(sp_log_use_config(cfg), 0);
    ck_assert_int_eq(sp_log_use_config(cfg), -EEXIST);
}

static const char *write_conf(const char *text)
{
    const char *path = path_in_dir("log.yml");
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static char *load_error(const char *text)
{
    static char out[2048];
    char *err = NULL;
    ck_assert_int_eq(sp_config_load(cfg, write_conf(text), &err), -EINVAL);
    /* Drop the directory part of the file names. */
    const char *p = strstr(err, "log.yml");
    snprintf(out, sizeof out, "%s", p ? p : err);
    free(err);
    return out;
}

START_TEST(configured_from_yaml)
{
    cfg_setup();
    char conf[2048];
    snprintf(conf, sizeof conf,
             "log:\n"
             "  level: warn\n"
             "  pattern: \"%%p %%c %%m%%n\"\n"
             "  appenders:\n"
             "    main: {type: file, path: %s}\n"
             "    access_file: {type: file, path: %s, pattern: \"%%m%%n\"}\n"
             "  root: [main]\n"
             "  loggers:\n"
             "    http: debug\n"
             "    http.access: {level: info, appenders: [access_file]}\n",
             path_in_dir("main.log"), path_in_dir("access.log"));
    char *err = NULL;
    ck_assert_msg(sp_config_load(cfg, write_conf(conf), &err) == 0, "%s", err);
    sp_logger_t *http = sp_logger("http"), *access = sp_logger("http.access");
    ck_assert_int_eq(sp_logger_level(sp_log_root()), SP_LEVEL_WARN);
    ck_assert_int_eq(sp_logger_level(http), SP_LEVEL_DEBUG);
    ck_assert_int_eq(sp_logger_level(access), SP_LEVEL_INFO);
    SP_LOG_DEBUG(access, "not written");
    SP_LOG_INFO(access, "GET /");
    SP_LOG_DEBUG(http, "parsing");
    SP_LOG_INFO(sp_logger("other"), "too low");
    SP_LOG_ERROR(sp_logger("other"), "bad");
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_str_eq(slurp(path_in_dir("access.log")), "GET /\n");
    ck_assert_str_eq(slurp(path_in_dir("main.log")), "DEBUG http parsing\nERROR other bad\n");

    /* The environment overrides the file; a reload without the loggers
     * puts them back to inheriting. */
    setenv("SPINDLE_LOG_LEVEL", "error", 1);
    ck_assert_int_eq(sp_config_load_env(cfg, &err), 0);
    unsetenv("SPINDLE_LOG_LEVEL");
    snprintf(conf, sizeof conf,
             "log:\n  appenders: {main: {type: file, path: %s}}\n  root: main\n",
             path_in_dir("main.log"));
    ck_assert_int_eq(sp_config_load(cfg, write_conf(conf), &err), 0);
    ck_assert_int_eq(sp_logger_level(sp_log_root()), SP_LEVEL_ERROR);
    ck_assert_int_eq(sp_logger_level(access), SP_LEVEL_ERROR);
    SP_LOG_ERROR(access, "now in main");
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_str_eq(slurp(path_in_dir("access.log")), "GET /\n");
    /* log.pattern went back to the default: a full line with a timestamp. */
    const char *main_log = slurp(path_in_dir("main.log"));
    ck_assert_ptr_nonnull(strstr(main_log, "ERROR http.access ["));
    ck_assert_ptr_nonnull(strstr(main_log, "now in main\n"));
    sp_config_destroy(cfg);
    remove_dir();
}
END_TEST

START_TEST(configuration_errors)
{
    cfg_setup();
    ck_assert_str_eq(load_error("log:\n  appenders:\n    a: {type: pipe}\n"),
                     "log.yml:3:8: log.appenders.a: type must be stdout, stderr or file\n");
    ck_assert_str_eq(load_error("log:\n  appenders:\n    a: {type: file}\n"),
                     "log.yml:3:8: log.appenders.a: a file appender needs a path\n");
    ck_assert_str_eq(load_error("log:\n  appenders:\n    a: {type: stdout, colour: red}\n"),
                     "log.yml:3:23: unknown key 'log.appenders.a.colour'\n");
    ck_assert_str_eq(load_error("log:\n  appenders:\n    a: {type: stdout, pattern: \"%y\"}\n"),
                     "log.yml:3:32: log.appenders.a: unknown pattern item '%y' (known: %d "
                     "%q %Q %p %c %t %F %f %l %m %n %%)\n");
    ck_assert_str_eq(load_error("log:\n  appenders:\n"
                                "    a: {type: file, path: /nonexistent/dir/x.log}\n"),
                     "log.yml:3:27: log.appenders.a: cannot open '/nonexistent/dir/x.log': "
                     "No such file or directory\n");
    ck_assert_str_eq(load_error("log:\n  root: [nope]\n"),
                     "log.yml:2:10: log.root: no appender named 'nope'\n");
    ck_assert_str_eq(load_error("log:\n  loggers:\n    http: loud\n"),
                     "log.yml:3:11: log.loggers.http: unknown level 'loud' (trace, debug, "
                     "info, warn, error, fatal, off)\n");
    ck_assert_str_eq(load_error("log:\n  loggers:\n    http: {appenders: [x]}\n"),
                     "log.yml:3:24: log.loggers.http: no appender named 'x'\n");
    ck_assert_str_eq(load_error("log:\n  level: chatty\n"),
                     "log.yml:2:10: log.level: unknown level 'chatty' (trace, debug, info, "
                     "warn, error, fatal, off)\n");
    ck_assert_str_eq(load_error("log:\n  rooot: []\n"), "log.yml:2:3: unknown key 'log.rooot'\n");
    ck_assert_str_eq(load_error("log:\n  queue_size: 1KiB\n"),
                     "log.yml:2:15: log.queue_size: 1KiB is out of range [4KiB, 1GiB]\n");
    /* Nothing was applied: the root still has its default level. */
    ck_assert_int_eq(sp_logger_level(sp_log_root()), SP_LEVEL_INFO);
    sp_config_destroy(cfg);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pattern_exact_output);
    tcase_add_test(tc, pattern_widths_time_and_escapes);
    tcase_add_test(tc, pattern_errors);
    tcase_add_test(tc, levels_and_inheritance);
    tcase_add_test(tc, file_appender_reopen_after_rename);
    tcase_add_test(tc, full_queue_fibers_drop_threads_wait);
    tcase_add_test(tc, full_disk_loses_whole_lines_and_says_so);
    tcase_add_test(tc, dev_full_counts_every_line);
    tcase_add_test(tc, no_loss_at_shutdown);
    tcase_add_test(tc, exit_writes_everything);
    tcase_add_test(tc, fork_child_has_its_own_writer);
    tcase_add_test(tc, configured_from_yaml);
    tcase_add_test(tc, configuration_errors);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
