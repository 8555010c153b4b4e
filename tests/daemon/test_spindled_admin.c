/* spindled's admin listener: off unless admin.listen is set; refused at
 * start on a non-loopback address (unless admin.allow_public) or on a
 * public server's address; when on, /metrics is a page a strict
 * Prometheus text-format reader (tests/tools/prom_parse.py) accepts, whose
 * counters move by a known load, /status links to the rest and
 * /debug/fibers dumps the fibers (text, and JSON), and a restarted worker's page counts the
 * restart. The public HTTP port serves none of them. SIGQUIT to the
 * supervisor writes the worker's fiber dump to its log. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_fixture.h"

enum { PAGE = 1 << 17 };

/* GET `path` on the admin port into a PAGE-sized buffer; the status. */
static int admin_get(const proc_t *p, const char *path, char *buf)
{
    return get(p->admin_port, path, buf, PAGE, now_ms() + 10000);
}

/* The value of the series written exactly as `series` on the page. */
static double value_of(const char *page, const char *series)
{
    char want[256];
    snprintf(want, sizeof want, "\n%s ", series);
    const char *at = strstr(page, want);
    ck_assert_msg(at, "no %s on the page", series);
    return strtod(at + strlen(want), NULL);
}

/* The page's body through prom_parse.py with `expects`; its exit status. */
static int parse_page(const char *page, const char *expects)
{
    const char *body = strstr(page, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    char path[160], cmd[2048];
    snprintf(path, sizeof path, "%s/metrics.txt", dir);
    write_file(path, body + 4);
    snprintf(cmd, sizeof cmd, "python3 %s %s %s", PROM_PARSE, path, expects);
    return system(cmd);
}

START_TEST(metrics_count_a_known_load)
{
    enum { N = 20 };
    write_config("admin:\n  listen: 127.0.0.1:0\n");
    proc_t p;
    start_daemon(&p);
    ck_assert_int_gt(p.admin_port, 0);
    char *page = malloc(PAGE), buf[4096];
    ck_assert_int_eq(admin_get(&p, "/metrics", page), 200);
    ck_assert_ptr_nonnull(strstr(page, "Content-Type: text/plain; version=0.0.4"));
    ck_assert_int_eq(parse_page(page, ""), 0);
    double before = value_of(page, "spindle_http_responses_total{server=\"http\",code=\"2xx\"}");
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(get(p.http_port, "/plaintext", buf, sizeof buf, now_ms() + 10000),
                         200);
    close(echo_ping(p.echo_port));
    ck_assert_int_eq(admin_get(&p, "/metrics", page), 200);
    char expects[1536];
    snprintf(expects, sizeof expects,
             "'spindle_http_responses_total{server=\"http\",code=\"2xx\"}=%.0f' "
             "'spindle_http_request_duration_seconds_count{server=\"http\"}>=%d' "
             "'spindle_http_connections_total{server=\"http\"}>=%d' "
             "'spindle_tcp_accepted_total{server=\"echo\",listener=\"127.0.0.1:%d\"}=1' "
             "'spindle_tcp_accepted_total{server=\"http\",listener=\"127.0.0.1:%d\"}>=%d' "
             "'spindle_daemon_restarts_total=0' 'spindle_worker_tasks_run_total{worker=\"1\"}>=0' "
             /* The acceptors, at least, are parked, on stacks they touched. */
             "'spindle_fibers{state=\"parked\"}>=2' 'spindle_fiber_stack_bytes>=8192'",
             before + N, N, N, p.echo_port, p.http_port, N);
    ck_assert_int_eq(parse_page(page, expects), 0);
    free(page);
    stop_daemon(&p);
}
END_TEST

START_TEST(status_links_and_fibers_not_built)
{
    write_config("admin:\n  listen: 127.0.0.1:0\n");
    proc_t p;
    start_daemon(&p);
    char *page = malloc(PAGE);
    ck_assert_int_eq(admin_get(&p, "/status", page), 200);
    ck_assert_ptr_nonnull(strstr(page, "<a href=\"/metrics\">"));
    ck_assert_ptr_nonnull(strstr(page, "<a href=\"/debug/fibers\">"));
    /* The worker's own fibers, parked in their accept loops among others. */
    ck_assert_int_eq(admin_get(&p, "/debug/fibers", page), 200);
    ck_assert_ptr_nonnull(strstr(page, "fibers parked"));
    ck_assert_ptr_nonnull(strstr(page, "end of fiber dump"));
    ck_assert_int_eq(admin_get(&p, "/debug/fibers?format=json", page), 200);
    ck_assert_ptr_nonnull(strstr(page, "application/json"));
    /* The public server has none of it. */
    ck_assert_int_eq(get(p.http_port, "/metrics", page, PAGE, now_ms() + 10000), 404);
    free(page);
    stop_daemon(&p);
}
END_TEST

/* A worker killed and restarted: the new one's page counts the restart. */
START_TEST(restart_counted)
{
    write_config("admin:\n  listen: 127.0.0.1:0\n");
    proc_t p;
    start_daemon(&p);
    restart_worker(&p);
    ck_assert_int_gt(p.admin_port, 0);
    char *page = malloc(PAGE);
    ck_assert_int_eq(admin_get(&p, "/metrics", page), 200);
    ck_assert_int_eq(parse_page(page, "'spindle_daemon_restarts_total=1'"), 0);
    free(page);
    stop_daemon(&p);
}
END_TEST

/* Not configured: no admin line and nothing listening on what would be
 * its port. */
START_TEST(off_unless_configured)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    ck_assert_int_eq(p.admin_port, 0);
    char buf[4096];
    ck_assert_int_eq(get(p.http_port, "/metrics", buf, sizeof buf, now_ms() + 10000), 404);
    stop_daemon(&p);
}
END_TEST

/* Refused before anything starts: exit 2 and the reason. */
static void refused(const char *setting, const char *want)
{
    char out[4096], err[4096];
    const char *args[] = {"-c", conf_path, "-s", "http.listen=[127.0.0.1:18080]",
                          "-s", setting, NULL};
    int status = run_to_end(args, out, sizeof out, err, sizeof err);
    ck_assert_msg(status == 2, "status %d: %s", status,
                  err);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
}

START_TEST(public_address_refused_at_check)
{
    write_config("");
    refused("admin.listen=0.0.0.0:0", "'0.0.0.0:0' is not a loopback address");
    refused("admin.listen=[::]:0", "'[::]:0' is not a loopback address");
    refused("admin.listen=127.0.0.1:18080", "clashes with '127.0.0.1:18080' of http.listen");
    refused("admin.listen=nowhere", "admin.listen: bad address 'nowhere'");
    /* Allowed on purpose: the check passes. */
    char out[8192], err[4096];
    const char *allowed[] = {"-c", conf_path, "-s", "admin.listen=0.0.0.0:0", "-s",
                             "admin.allow_public=true", "--print-config", NULL};
    int status = run_to_end(allowed, out, sizeof out, err, sizeof err);
    ck_assert_msg(status == 0, "%s", err);
}
END_TEST

/* SIGQUIT sent to the supervisor reaches the worker, which writes its
 * fiber dump to the configured log (here stderr with a pattern of ours:
 * each part is a record of logger spindle.fibers at WARN) and serves on. */
START_TEST(sigquit_to_supervisor_dumps_to_log)
{
    write_config("  pattern: \"LOG %p %c: %m%n\"\n");
    proc_t p;
    start_daemon(&p);
    char want[96], *err = malloc(PAGE);
    ck_assert_int_eq(kill(p.pid, SIGQUIT), 0);
    read_err_until(&p, "end of fiber dump", err, PAGE);
    snprintf(want, sizeof want, "LOG WARN spindle.fibers: spindle fiber dump: pid %ld,",
             p.worker);
    ck_assert_msg(strstr(err, want), "no dump heading in:\n%s", err);
    /* How many fibers an idle daemon has parked varies (none, at times);
     * that each group is a record is test_dump's. */
    ck_assert_ptr_nonnull(strstr(strstr(err, want), "end of fiber dump"));
    char buf[4096];
    ck_assert_int_eq(get(p.http_port, "/plaintext", buf, sizeof buf, now_ms() + 10000), 200);
    ck_assert_int_eq(kill((pid_t)p.worker, 0), 0); /* the same worker serves */
    free(err);
    stop_daemon(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spindled_admin");
    TCase *tc = SP_TEST_CASE(s, "admin", 60, setup, teardown, metrics_count_a_known_load,
                             status_links_and_fibers_not_built, restart_counted, off_unless_configured,
                             public_address_refused_at_check,
                             sigquit_to_supervisor_dumps_to_log);
    tcase_add_unchecked_fixture(tc, make_base, remove_base);
    return sp_test_run(s);
}
