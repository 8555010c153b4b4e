/* sp_fibers_dump (debug.h): three named fibers parked in three functions
 * (a read on a socket, a sleep, a mutex) and 1,000 parked in one; the dump
 * names each wait kind and function, and groups the 1,000 into one entry.
 * The JSON form parses (python3). Dumps made while fibers keep switching
 * all finish. Through a logger, each group is a record of its own. The
 * wait functions are not static and the test is linked with -rdynamic, so
 * dladdr() names them. */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <spindle/debug.h>
#include <spindle/iomanager.h>
#include <spindle/sync.h>
#include <spindle/task.h>

#include "task_util.h"
#include "testutil.h"

enum { MANY = 1000, NAMED = 3 };

#if (defined(SP_TSAN) || defined(SP_ASAN)) && !defined(SP_DUMP_DWARF)
/* The sanitizer's read() interceptor, which the reader's call goes through,
 * keeps no frame pointer: a frame-pointer walk (no libunwind) ends there. */
#define READER_FRAME "read+"
#else
#define READER_FRAME "dump_test_reader+"
#endif

typedef struct world {
    sp_iomanager_t *io;
    int fds[2];
    sp_mutex_t *mutex;
    sp_sem_t *sem;
    sp_fiber_t *reader, *sleeper, *locker;
    sp_fiber_t *many[MANY];
} world_t;

/* Not static: -rdynamic exports them for dladdr. The volatile result keeps
 * each call from being a tail call, which would drop its frame. */
int dump_test_reader(void *arg);
int dump_test_sleeper(void *arg);
int dump_test_locker(void *arg);
int dump_test_many(void *arg);

int dump_test_reader(void *arg)
{
    world_t *w = arg;
    char c;
    volatile int rc = (int)read(w->fds[0], &c, 1);
    return rc;
}

int dump_test_sleeper(void *arg)
{
    (void)arg;
    volatile int rc = sp_sleep_us(600 * 1000000ull); /* ended by interrupt */
    return rc;
}

int dump_test_locker(void *arg)
{
    world_t *w = arg;
    volatile int rc = sp_mutex_lock(w->mutex);
    if (rc == 0)
        sp_mutex_unlock(w->mutex);
    return rc;
}

int dump_test_many(void *arg)
{
    world_t *w = arg;
    volatile int rc = sp_sem_wait(w->sem, SP_FOREVER);
    return rc;
}

static sp_fiber_t *go_named(world_t *w, sp_task_fn fn, const char *name)
{
    sp_fiber_t *f = NULL;
    sp_task_opts_t o = {.name = name};
    ck_assert_int_eq(sp_go(sp_iomanager_scheduler(w->io), fn, w, &o, &f), 0);
    return f;
}

static char *dump_text(unsigned flags, int *listed)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(out);
    *listed = sp_fibers_dump(out, flags);
    fclose(out);
    return buf;
}

/* Until every fiber has parked: a dump reports how many have; bounded. */
static void wait_all_parked(void)
{
    char want[64];
    snprintf(want, sizeof want, " %d parked", MANY + NAMED);
    for (int i = 0; i < 5000; i++) {
        int listed;
        char *text = dump_text(SP_DUMP_NO_STACK, &listed);
        bool done = strstr(text, want) != NULL;
        free(text);
        if (done)
            return;
        usleep(1000);
    }
    ck_abort_msg("fibers did not park");
}

static void world_start(world_t *w)
{
    w->io = io_new(2);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, w->fds), 0);
    w->mutex = sp_mutex_create();
    w->sem = sp_sem_create(0);
    ck_assert_int_eq(sp_mutex_lock(w->mutex), 0); /* the locker waits */
    w->reader = go_named(w, dump_test_reader, "reader");
    w->sleeper = go_named(w, dump_test_sleeper, "sleeper");
    w->locker = go_named(w, dump_test_locker, "locker");
    for (int i = 0; i < MANY; i++)
        w->many[i] = go_named(w, dump_test_many, "many");
    wait_all_parked();
}

static void world_end(world_t *w)
{
    ck_assert_int_eq(write(w->fds[1], "x", 1), 1);
    ck_assert_int_eq(join(w->reader), 1);
    ck_assert_int_eq(sp_fiber_interrupt(w->sleeper, ECANCELED), 0);
    ck_assert_int_eq(join(w->sleeper), -ECANCELED);
    ck_assert_int_eq(sp_mutex_unlock(w->mutex), 0);
    ck_assert_int_eq(join(w->locker), 0);
    for (int i = 0; i < MANY; i++)
        ck_assert_int_eq(sp_sem_post(w->sem), 0);
    for (int i = 0; i < MANY; i++)
        ck_assert_int_eq(join(w->many[i]), 0);
    close(w->fds[0]);
    close(w->fds[1]);
    sp_mutex_destroy(w->mutex);
    sp_sem_destroy(w->sem);
    io_end(w->io);
}

/* The group whose header is `header`, up to the next group: it must
 * mention `what`. */
static void assert_group_has(const char *text, const char *header,
                             const char *what)
{
    const char *g = strstr(text, header);
    ck_assert_msg(g != NULL, "no group \"%s\" in:\n%s", header, text);
    const char *end = strstr(g, "\n\n");
    const char *hit = strstr(g, what);
    ck_assert_msg(hit && (!end || hit < end), "group \"%s\" lacks \"%s\":\n%s",
                  header, what, text);
}

START_TEST(dump_names_waits_and_groups)
{
    static world_t w;
    world_start(&w);
    int listed;
    char *text = dump_text(0, &listed);
    ck_assert_int_ge(listed, MANY + NAMED);
    assert_group_has(text, "\n1 fiber parked on fd read:", "\"reader\"");
    assert_group_has(text, "\n1 fiber parked on fd read:", READER_FRAME);
    assert_group_has(text, "\n1 fiber parked on sleep:", "\"sleeper\"");
    assert_group_has(text, "\n1 fiber parked on sleep:", "dump_test_sleeper+");
    assert_group_has(text, "\n1 fiber parked on mutex:", "\"locker\"");
    assert_group_has(text, "\n1 fiber parked on mutex:", "dump_test_locker+");
    assert_group_has(text, "\n1000 fibers parked on sem:", "dump_test_many+");
    assert_group_has(text, "\n1000 fibers parked on sem:", "and 997 more");
    free(text);
    /* The counts a dump would list: every parked one, each with a stack. */
    sp_fibers_count_t n;
    ck_assert_int_eq(sp_fibers_count(&n), 0);
    ck_assert_uint_ge(n.parked, MANY + NAMED);
    ck_assert_uint_ge(n.stack_bytes, MANY * 1024ul); /* a parked stack: ~3 KiB */
    world_end(&w);
}
END_TEST

/* The JSON form, checked by python3's parser: the 1,000 in one group of
 * kind "sem", whose frames name their function. */
START_TEST(dump_json_parses)
{
    static world_t w;
    world_start(&w);
    char path[] = "/tmp/sp_dump_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *out = fdopen(fd, "w");
    ck_assert_int_ge(sp_fibers_dump(out, SP_DUMP_JSON), MANY + NAMED);
    fclose(out);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "g=[g for g in d[\"groups\"] if g[\"count\"]==%d][0]; "
             "assert g[\"wait\"]==\"sem\" and g[\"state\"]==\"parked\"; "
             "assert any(f[\"function\"]==\"dump_test_many\" for f in g[\"frames\"]); "
             "r=[g for g in d[\"groups\"] if g[\"fibers\"][0][\"name\"]==\"reader\"][0]; "
             "assert r[\"wait\"]==\"fd read\" and r[\"fibers\"][0][\"fd\"]>=0' %s",
             MANY, path);
    int rc = system(cmd);
    unlink(path);
    ck_assert_int_eq(rc, 0);
    world_end(&w);
}
END_TEST

/* Fibers that keep switching (yield, sleep) a few calls deep while dumps
 * walk their stacks: walks race resumes over and over. Every dump must
 * finish, however its walks end. */
enum { CHURNERS = 8, CHURN_DUMPS = 300 };
static _Atomic int churn_stop;

int dump_test_churn(void *arg);
int dump_test_churn(void *arg)
{
    int depth = (int)(intptr_t)arg;
    if (depth > 0) {
        volatile int rc = dump_test_churn((void *)(intptr_t)(depth - 1));
        return rc;
    }
    for (unsigned i = 0; !atomic_load(&churn_stop); i++)
        if (i % 2 ? sp_yield() : sp_sleep_us(1))
            return -1;
    return 0;
}

START_TEST(dump_survives_fibers_switching)
{
    sp_iomanager_t *io = io_new(2);
    sp_fiber_t *f[CHURNERS];
    atomic_store(&churn_stop, 0);
    for (int i = 0; i < CHURNERS; i++)
        ck_assert_int_eq(sp_go(sp_iomanager_scheduler(io), dump_test_churn,
                               (void *)(intptr_t)(i % 4 + 1), NULL, &f[i]),
                         0);
    FILE *out = fopen("/dev/null", "w");
    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < CHURN_DUMPS; i++)
        ck_assert_int_ge(sp_fibers_dump(out, 0), CHURNERS);
    fclose(out);
    atomic_store(&churn_stop, 1);
    for (int i = 0; i < CHURNERS; i++)
        ck_assert_int_eq(join(f[i]), 0);
    io_end(io);
}
END_TEST

/* Records a callback appender got, each one message ("%m"). */
typedef struct records {
    char *text[64];
    int n;
} records_t;

static void keep_record(const char *line, size_t len, void *arg)
{
    records_t *r = arg;
    if (r->n < 64)
        r->text[r->n++] = strndup(line, len);
}

/* Through a logger: one record for the heading and one per group, in the
 * text dump's order; nothing at a level the logger does not take. */
START_TEST(dump_to_log_is_a_record_per_group)
{
    static world_t w;
    static records_t got;
    world_start(&w);
    sp_logger_t *lg = sp_logger("test.dump");
    sp_log_appender_t *app = sp_log_callback(keep_record, &got, "%m");
    ck_assert_ptr_nonnull(app);
    ck_assert_int_eq(sp_logger_set_appenders(lg, &app, 1), 0);
    ck_assert_int_eq(sp_logger_set_level(lg, SP_LEVEL_ERROR), 0);
    ck_assert_int_eq(sp_fibers_dump_to_log(lg, SP_LEVEL_WARN), 0);
    ck_assert_int_eq(sp_logger_set_level(lg, SP_LEVEL_INFO), 0);
    ck_assert_int_ge(sp_fibers_dump_to_log(lg, SP_LEVEL_WARN), MANY + NAMED);
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_int_ge(got.n, 5); /* heading, fd read, sleep, mutex, sem */
    ck_assert_ptr_nonnull(strstr(got.text[0], "spindle fiber dump: pid"));
    bool sem = false;
    for (int i = 0; i < got.n; i++) {
        ck_assert_msg(!strstr(got.text[i], "\n\n"), "a blank line in a record");
        if (strncmp(got.text[i], "1000 fibers parked on sem:", 26) == 0)
            sem = strstr(got.text[i], "and 997 more") != NULL;
    }
    ck_assert_msg(sem, "no record of the 1000 sem waiters");
    ck_assert_ptr_nonnull(strstr(got.text[got.n - 1], "end of fiber dump"));
    for (int i = 0; i < got.n; i++)
        free(got.text[i]);
    sp_log_appender_release(app);
    world_end(&w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dump");
    SP_TEST_CASE(s, "dump", 60, NULL, NULL, dump_names_waits_and_groups,
                 dump_json_parses, dump_survives_fibers_switching,
                 dump_to_log_is_a_record_per_group);
    return sp_test_run(s);
}
