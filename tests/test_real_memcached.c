/* libmemcached, which nobody here wrote, through its synchronous API: 200
 * fibers on ONE IOManager worker each set a key of their own and get it
 * back from a memcached this test starts on a free 127.0.0.1 port.
 *
 * memcached has no slow command, so the overlap is shown without timing:
 * the server is stopped (SIGSTOP) before the fibers start; every one of
 * them connects (the kernel completes the handshake into the listen
 * backlog), sends its set and parks waiting for the answer, while one more
 * fiber on the same worker still runs and sees all 200 parked. It then
 * resumes the server (SIGCONT), and every set and get must succeed.
 *
 * Built twice, like test_hooks (hooks linked in, and with
 * LD_PRELOAD=libspindle_preload.so), and in plain builds a third time with
 * -O2 -D_FORTIFY_SOURCE=2. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "clients.h"
#include "real_check.h"
#include "real_server.h"

#include "testutil.h"

#ifndef SP_MEMCACHED
#define SP_MEMCACHED "/usr/bin/memcached"
#endif

enum { FIBERS = 200 };

static rs_server_t mc;
static int mc_port;

static bool memcached_spawn(int port)
{
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    /* -vv only for its "server listening" line; it refuses to run as root
     * without -u root (the NULL ends argv early when not root). */
    char *argv[] = {SP_MEMCACHED, "-U", "0", "-l", "127.0.0.1", "-p", port_s,
                    "-c", "1024", "-t", "2", "-vv",
                    geteuid() == 0 ? "-u" : NULL, "root", NULL};
    if (!rs_start(&mc, argv, "server listening", 10000))
        return false;
    /* Quiet from now on: -vv prints every command, and nobody reads its
     * output until the end. This is also a first request. */
    memcached_st *c = memcached_create(NULL);
    memcached_return_t rc = c ? memcached_server_add(c, "127.0.0.1", (in_port_t)port)
                              : MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_verbosity(c, 0);
    if (rc == MEMCACHED_SUCCESS) {
        memcached_free(c);
        return true;
    }
    rs_stop(&mc);
    snprintf(mc.error, sizeof mc.error, "memcached on port %d: verbosity 0: %s", port,
             memcached_strerror(c, rc));
    memcached_free(c);
    return false;
}

/* Unchecked fixture: once, in Check's parent process; a test fails with
 * mc.error if this did not work. */
static void memcached_start(void)
{
    mc_port = rs_start_on_free_port(&mc, memcached_spawn);
}

static void memcached_stop(void)
{
    rs_stop(&mc);
}

START_TEST(memcached_200_fibers_park_on_a_stopped_server)
{
    ck_assert_msg(mc.pid > 0, "%s", mc.error);
    hc_result_t one, many;
    ck_assert_int_eq(hc_memcached_run("127.0.0.1", mc_port, 1, NULL, &one), 0);
    hc_stall_t stall = {rc_resume_server, &mc.pid};
    rc_stop_server(mc.pid, &one);
    ck_assert_int_eq(hc_memcached_run("127.0.0.1", mc_port, FIBERS, &stall, &many), 0);
    rc_check_stalled("libmemcached", FIBERS, &many);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("real_memcached");
    TCase *tc = tcase_create("memcached");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, memcached_start, memcached_stop);
    tcase_add_test(tc, memcached_200_fibers_park_on_a_stopped_server);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
