/* Real client libraries nobody here wrote, through their synchronous APIs:
 * 200 fibers on ONE IOManager worker each make one request that takes
 * ~100 ms on the server, and the requests overlap (the whole run takes about
 * one request's time, not 200 of them).
 *
 *  - hiredis against a redis-server this test starts on a free port: each
 *    fiber does redisConnect + BLPOP on a key of its own with a 0.1 s
 *    timeout (redis answers nil after 100 ms and serves others meanwhile).
 *  - libcurl's easy API against a local HTTP server on plain threads (not
 *    fibers) that answers each request after 100 ms.
 *
 * Built twice, like test_hooks: hooks linked in, and on libspindle_nohook
 * with LD_PRELOAD=libspindle_preload.so. The fibers and the HTTP server are
 * in apps/hook_clients (run.c, clients.c), shared with spindle-hook-clients;
 * redis is started by real_server.c. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "clients.h"
#include "real_check.h"
#include "real_server.h"

#include "testutil.h"

#ifndef SP_REDIS_SERVER
#define SP_REDIS_SERVER "redis-server"
#endif

enum { FIBERS = 200, DELAY_MS = 100 };

/* ---- a redis-server of our own ------------------------------------------ */

static rs_server_t redis;
static int redis_port;

/* On `port`: true once it answers PING. */
static bool redis_spawn(int port)
{
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    char *argv[] = {SP_REDIS_SERVER, "--port", port_s, "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--hz", "100", "--loglevel", "notice", NULL};
    /* It says so once its socket listens (Redis 5 to 7 alike). */
    if (!rs_start(&redis, argv, "Ready to accept connections", 5000))
        return false;
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
    bool pong = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
    freeReplyObject(r);
    redisFree(c);
    if (pong)
        return true;
    rs_stop(&redis);
    snprintf(redis.error, sizeof redis.error,
             "redis-server on port %d did not answer PING within 5 s", port);
    return false;
}

/* Unchecked fixture: runs in Check's parent process, once for the tests
 * that use redis; a test fails with redis.error if this did not work. */
static void redis_start(void)
{
    redis_port = rs_start_on_free_port(&redis, redis_spawn);
}

static void redis_stop(void)
{
    rs_stop(&redis);
}

/* ---- hiredis ------------------------------------------------------------ */

START_TEST(hiredis_200_fibers_overlap)
{
    ck_assert_msg(redis.pid > 0, "%s", redis.error);
    hc_result_t one, many;
    ck_assert_int_eq(hc_redis_run("127.0.0.1", redis_port, 1, DELAY_MS, &one), 0);
    ck_assert_int_eq(hc_redis_run("127.0.0.1", redis_port, FIBERS, DELAY_MS, &many), 0);
    rc_check_overlap("hiredis", FIBERS, DELAY_MS, &one, &many);
}
END_TEST

/* ---- libcurl ------------------------------------------------------------ */

START_TEST(libcurl_200_fibers_overlap)
{
    hc_http_server_t *srv = hc_http_server_start(DELAY_MS);
    ck_assert_msg(srv != NULL, "HTTP server: %s", strerror(errno));
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", hc_http_server_port(srv));
    hc_result_t one, many;
    ck_assert_int_eq(hc_curl_run(url, 1, &one), 0);
    ck_assert_int_eq(hc_curl_run(url, FIBERS, &many), 0);
    unsigned long served;
    int peak;
    hc_http_server_counts(srv, &served, &peak);
    hc_http_server_stop(srv);
    rc_check_overlap("libcurl", FIBERS, DELAY_MS, &one, &many);
    ck_assert_uint_eq(served, 1 + FIBERS);
    ck_assert_int_gt(peak, 1); /* the server saw them at the same time */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("real_clients");
    TCase *redis = tcase_create("hiredis");
    tcase_set_timeout(redis, 60);
    tcase_add_unchecked_fixture(redis, redis_start, redis_stop);
    tcase_add_test(redis, hiredis_200_fibers_overlap);
    suite_add_tcase(s, redis);
    TCase *curl = tcase_create("libcurl");
    tcase_set_timeout(curl, 60);
    tcase_add_test(curl, libcurl_200_fibers_overlap);
    suite_add_tcase(s, curl);
    return sp_test_run(s);
}
