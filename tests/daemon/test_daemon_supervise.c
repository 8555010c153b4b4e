/* spindled running: HTTP and echo served, one instance per pid file and per
 * port, workers restarted (and a crash loop stopped), SIGTERM finishing
 * requests in flight, SIGHUP reloads (good and bad), lost log lines, and
 * the worker dying with its supervisor. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <spindle/daemon.h>

#include "daemon_fixture.h"

/* ---- tests ------------------------------------------------------------------ */

START_TEST(serves_http_and_echo)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    char buf[1024];
    ck_assert_int_eq(get(p.http_port, "/plaintext", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nHello, World!"));
    ck_assert_int_eq(get(p.http_port, "/json", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_int_eq(status_field(p.http_port, "pid"), p.worker);
    int fd = echo_ping(p.echo_port);
    close(fd);
    stop_daemon(&p);
    ck_assert_int_ne(access(pid_path, F_OK), 0); /* removed on exit */
}
END_TEST

START_TEST(second_instance_refused_by_pid_lock)
{
    write_config("");
    proc_t a, b;
    start_daemon(&a);
    ck_assert_int_eq(status_field(a.http_port, "pid"), a.worker);
    const char *args[] = {"-c", conf_path, NULL};
    spawn(&b, args);
    int status = wait_exit(b.pid, 10000);
    ck_assert_int_ne(status, -1);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char err[2048], want[64];
    read_err(&b, err, sizeof err);
    ck_assert_msg(strstr(err, pid_path), "no pid file in: %s", err);
    snprintf(want, sizeof want, "pid %ld", (long)a.pid);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    close_proc(&b);
    /* The first one is untouched. */
    char buf[512];
    ck_assert_int_eq(get(a.http_port, "/plaintext", buf, sizeof buf, now_ms() + 5000), 200);
    stop_daemon(&a);
}
END_TEST

START_TEST(worker_killed_is_restarted)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    long old = p.worker;
    ck_assert_int_eq(kill((pid_t)old, SIGKILL), 0);
    /* Within 2 s: a new worker reports its ports and answers. */
    int64_t deadline = now_ms() + 2000;
    ck_assert_msg(await_worker(&p, deadline), "no new worker within 2 s");
    ck_assert_int_ne(p.worker, old);
    char buf[512];
    int status;
    while ((status = get(p.http_port, "/plaintext", buf, sizeof buf, deadline)) != 200 &&
           left_ms(deadline) > 0)
        poll(NULL, 0, 5);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(status_field(p.http_port, "pid"), p.worker);
    /* A second death soon after: logged with its reason, and the back-off
     * doubled. */
    ck_assert_int_eq(kill((pid_t)p.worker, SIGKILL), 0);
    ck_assert(await_worker(&p, now_ms() + 5000));
    char err[8192], want[128];
    read_err_until(&p, "restarting the worker in 200 ms", err, sizeof err);
    snprintf(want, sizeof want, "worker %ld killed by signal 9", old);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_ptr_nonnull(strstr(err, "restarting the worker in 100 ms"));
    ck_assert_ptr_nonnull(strstr(err, "restarting the worker in 200 ms"));
    stop_daemon(&p);
}
END_TEST

enum { INFLIGHT = 100 };

START_TEST(sigterm_finishes_inflight_requests)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    int fds[INFLIGHT];
    for (int i = 0; i < INFLIGHT; i++) {
        ck_assert_int_ge(fds[i] = connect_port(p.http_port), 0);
        send_get(fds[i], "/slow?ms=1500");
    }
    ck_assert_msg(await_status(p.http_port, "slow_active", INFLIGHT, 5000),
                  "the slow requests are not all in progress");
    ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
    int64_t deadline = now_ms() + 10000;
    for (int i = 0; i < INFLIGHT; i++) {
        char buf[1024];
        ck_assert_int_eq(read_response(fds[i], buf, sizeof buf, deadline), 200);
        ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nslow done\n"));
        close(fds[i]);
    }
    int status = wait_exit(p.pid, 20000);
    ck_assert(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close_proc(&p);
}
END_TEST

/* Time until the server closes an idle connection, in ms, or -1. */
static int64_t closed_after(int fd, int timeout_ms)
{
    int64_t start = now_ms();
    struct pollfd pfd = {fd, POLLIN, 0};
    char c;
    if (poll(&pfd, 1, timeout_ms) != 1 || read(fd, &c, 1) != 0)
        return -1;
    return now_ms() - start;
}

START_TEST(sighup_changes_keepalive_timeout)
{
    char text[1024];
    snprintf(text, sizeof text,
             "spindle: {pid_file: %s}\nhttp: {listen: [127.0.0.1:0], keepalive_timeout: %s}\n"
             "echo: {enabled: false}\n",
             pid_path, "60s");
    write_file(conf_path, text);
    proc_t p;
    const char *args[] = {"-c", conf_path, NULL};
    spawn(&p, args);
    ck_assert(await_worker(&p, now_ms() + 10000));
    char buf[1024];
    /* An old idle keep-alive connection, and one with a request in flight. */
    int idle = connect_port(p.http_port), busy = connect_port(p.http_port);
    send_get(idle, "/plaintext");
    ck_assert_int_eq(read_response(idle, buf, sizeof buf, now_ms() + 5000), 200);
    send_get(busy, "/slow?ms=800");
    ck_assert(await_status(p.http_port, "slow_active", 1, 5000));

    snprintf(text, sizeof text,
             "spindle: {pid_file: %s}\nhttp: {listen: [127.0.0.1:0], keepalive_timeout: %s}\n"
             "echo: {enabled: false}\n",
             pid_path, "200ms");
    write_file(conf_path, text);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    ck_assert(await_status(p.http_port, "keepalive_timeout_ms", 200, 5000));

    /* The request in flight completes; old connections still work. */
    ck_assert_int_eq(read_response(busy, buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_ptr_nonnull(strstr(buf, "slow done"));
    send_get(idle, "/plaintext");
    ck_assert_int_eq(read_response(idle, buf, sizeof buf, now_ms() + 5000), 200);
    /* A connection opened after the reload is closed after ~200 ms idle. */
    int fresh = connect_port(p.http_port);
    send_get(fresh, "/plaintext");
    ck_assert_int_eq(read_response(fresh, buf, sizeof buf, now_ms() + 5000), 200);
    int64_t ms = closed_after(fresh, 5000);
    ck_assert_msg(ms >= 100 && ms < 2000, "closed after %lld ms", (long long)ms);
    close(fresh);
    close(idle);
    close(busy);
    stop_daemon(&p);
}
END_TEST

/* Write the configuration file: `yaml` after the pid file's line. */
static void rewrite_config(const char *yaml)
{
    char text[1024];
    snprintf(text, sizeof text, "spindle: {pid_file: %s}\n%s", pid_path, yaml);
    write_file(conf_path, text);
}

/* Start spindled on rewrite_config(yaml) and wait for its worker. */
static void start_with(proc_t *p, const char *yaml)
{
    rewrite_config(yaml);
    const char *args[] = {"-c", conf_path, NULL};
    spawn(p, args);
    ck_assert_msg(await_worker(p, now_ms() + 10000), "spindled did not start");
}

/* The echo service's timeouts come from the file and follow a reload: a
 * quiet connection, open since before the reload, is closed once the idle
 * timeout drops from 60 s to 200 ms, well before the 15 s the old timeouts
 * would check it after (the keep-alive change shows in /status when the
 * reload is done). */
START_TEST(echo_idle_timeout_from_config_and_reload)
{
    const char *yaml = "http: {listen: [127.0.0.1:0], keepalive_timeout: %s}\n"
                       "echo: {listen: [127.0.0.1:0], idle_timeout: %s, write_timeout: 60s}\n";
    char text[512];
    snprintf(text, sizeof text, yaml, "60s", "60s");
    proc_t p;
    start_with(&p, text);
    int quiet = echo_ping(p.echo_port);
    snprintf(text, sizeof text, yaml, "61s", "200ms");
    rewrite_config(text);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    ck_assert(await_status(p.http_port, "keepalive_timeout_ms", 61000, 5000));
    ck_assert_int_ge(closed_after(quiet, 10000), 0);
    close(quiet);
    int fresh = echo_ping(p.echo_port);
    ck_assert_int_ge(closed_after(fresh, 10000), 0);
    close(fresh);
    stop_daemon(&p);
}
END_TEST

/* A log on a full disk (/dev/full: every write fails with ENOSPC): the
 * lines it loses show in /status. Each request logs an access line, so
 * asking again makes more; the count is looked at until it moves. */
START_TEST(status_counts_lost_log_lines)
{
    proc_t p;
    start_with(&p, "http: {listen: [127.0.0.1:0], access_log: true}\n"
                   "echo: {enabled: false}\n"
                   "log:\n  appenders: {full: {type: file, path: /dev/full}}\n"
                   "  root: [full]\n");
    int64_t deadline = now_ms() + 5000;
    long lost;
    while ((lost = status_field(p.http_port, "log_lost")) == 0 && now_ms() < deadline)
        poll(NULL, 0, 5); /* the writer is asynchronous; re-ask */
    ck_assert_int_gt(lost, 0);
    ck_assert_int_gt(status_field(p.http_port, "log_write_errors"), 0);
    char buf[1024];
    ck_assert_int_eq(get(p.http_port, "/status", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_ptr_nonnull(strstr(buf, "\"log_last_error\":\"No space left on device\""));
    stop_daemon(&p);
}
END_TEST

START_TEST(bad_reload_keeps_old_configuration)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    write_file(conf_path, "http:\n  keepalive_timeout: soon\n");
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    char err[4096], want[256];
    snprintf(want, sizeof want, "%s:2:22: http.keepalive_timeout", conf_path);
    read_err_until(&p, want, err, sizeof err);
    ck_assert_msg(strstr(err, "reload failed") && strstr(err, want), "got: %s", err);
    /* Still serving, with the old values. */
    char buf[512];
    ck_assert_int_eq(get(p.http_port, "/plaintext", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_int_eq(status_field(p.http_port, "keepalive_timeout_ms"), 60000);
    stop_daemon(&p);
}
END_TEST


/* ---- one instance per port, and it dies with its supervisor ---------------- */

/* A directory to start spindled in, as from a checkout: conf/ is the
 * shipped one (conf/spindle.yml and conf/www). */
static void checkout(const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    char conf[256];
    snprintf(conf, sizeof conf, "%s/conf", path);
    ck_assert_int_eq(symlink(SPINDLE_CONF_DIR, conf), 0);
}

START_TEST(shipped_config_second_instance_refused)
{
    char here[128], there[128];
    checkout("a", here, sizeof here);
    checkout("b", there, sizeof there);
    /* The certificate make run makes, in the checkout's run/tls/. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cd %s && sh %s run/tls >/dev/null", here, SPINDLE_DEV_CERT_SH);
    ck_assert_int_eq(system(cmd), 0);
    /* The shipped ports may be busy on this machine: port 0 for the first. */
    const char *args[] = {"-c", "conf/spindle.yml", "-s", "http.listen=[127.0.0.1:0]",
                          "-s", "https.listen=[127.0.0.1:0]",
                          "-s", "echo.listen=[127.0.0.1:0]", NULL};
    proc_t a;
    spawn_in(&a, here, args);
    ck_assert_msg(await_worker(&a, now_ms() + 10000), "spindled did not start");
    ck_assert_int_gt(a.https_port, 0);
    /* The shipped pid file, under the start directory. */
    char pid_file[192];
    snprintf(pid_file, sizeof pid_file, "%s/run/spindled.pid", here);
    ck_assert_int_eq(sp_daemon_read_pid(pid_file), a.pid);
    char out[1024], err[4096];
    /* The same command again: refused by the pid lock. */
    ck_assert_int_eq(run_in_to_end(here, args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "already running"), "got: %s", err);
    /* From elsewhere (its own pid file), on the first one's ports: refused
     * by the kernel, at once, since the ports are not shared. */
    char http[64], echo[64], want[128];
    snprintf(http, sizeof http, "http.listen=[127.0.0.1:%d]", a.http_port);
    snprintf(echo, sizeof echo, "echo.listen=[127.0.0.1:%d]", a.echo_port);
    const char *same_ports[] = {"-c", "conf/spindle.yml", "-s", http, "-s", echo,
                                "-s", "https.enabled=false", NULL};
    ck_assert_int_eq(run_in_to_end(there, same_ports, out, sizeof out, err, sizeof err), 1);
    snprintf(want, sizeof want, "http.listen [127.0.0.1:%d]: Address already in use",
             a.http_port);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_msg(strstr(err, "not restarting"), "got: %s", err);
    ck_assert_msg(!strstr(out, "listening on"), "it listened: %s", out);
    /* Every connection still reaches the first one. */
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(status_field(a.http_port, "pid"), a.worker);
    stop_daemon(&a);
}
END_TEST

/* -d: the original process waits for the first worker to serve, so a
 * detached start on a busy port fails too, with the reason. */
START_TEST(detached_start_on_busy_port_exits_1)
{
    write_config("");
    proc_t a;
    start_daemon(&a);
    char pid_file[224], http[64], out[1024], err[4096], want[128];
    snprintf(pid_file, sizeof pid_file, "spindle.pid_file=%s/b.pid", dir);
    snprintf(http, sizeof http, "http.listen=[127.0.0.1:%d]", a.http_port);
    const char *args[] = {"-c", conf_path, "-d", "-s", pid_file, "-s", http, NULL};
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    snprintf(want, sizeof want, "http.listen [127.0.0.1:%d]: Address already in use",
             a.http_port);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_msg(strstr(err, "not restarting"), "got: %s", err);
    stop_daemon(&a);
}
END_TEST

START_TEST(reuse_port_shares_a_port_when_asked)
{
    write_config("");
    const char *args[] = {"-c", conf_path, "-s", "spindle.reuse_port=true", NULL};
    proc_t a, b;
    spawn(&a, args);
    ck_assert(await_worker(&a, now_ms() + 10000));
    char pid_file[224], http[64], echo[64];
    snprintf(pid_file, sizeof pid_file, "spindle.pid_file=%s/b.pid", dir);
    snprintf(http, sizeof http, "http.listen=[127.0.0.1:%d]", a.http_port);
    snprintf(echo, sizeof echo, "echo.listen=[127.0.0.1:%d]", a.echo_port);
    const char *args_b[] = {"-c", conf_path, "-s", "spindle.reuse_port=true", "-s", pid_file,
                            "-s", http, "-s", echo, NULL};
    spawn(&b, args_b);
    ck_assert_msg(await_worker(&b, now_ms() + 10000), "the second one did not start");
    ck_assert_int_eq(b.http_port, a.http_port);
    stop_daemon(&b);
    stop_daemon(&a);
}
END_TEST

START_TEST(supervisor_killed_takes_worker_down)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    pid_t worker = (pid_t)p.worker;
    track(worker, true);
    int64_t killed = now_ms();
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    int status = wait_exit(p.pid, 5000);
    ck_assert(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ck_assert_msg(await_gone(worker, left_ms(killed + 1000)),
                  "the worker outlived its supervisor by 1 s");
    track(worker, false);
    ck_assert_int_lt(connect_port(p.http_port), 0);
    close_proc(&p);
}
END_TEST

START_TEST(crash_loop_stops_restarts)
{
    char root[128], root_arg[160];
    snprintf(root, sizeof root, "%s/www", dir);
    ck_assert_int_eq(mkdir(root, 0755), 0);
    snprintf(root_arg, sizeof root_arg, "http.root=%s", root);
    write_config("");
    const char *args[] = {"-c", conf_path, "-s", root_arg,
                          "-s", "spindle.restart_backoff_min=10ms",
                          "-s", "spindle.restart_backoff_max=20ms", NULL};
    proc_t p;
    spawn(&p, args);
    ck_assert(await_worker(&p, now_ms() + 10000));
    /* Every worker started from now on fails at once. */
    ck_assert_int_eq(rmdir(root), 0);
    ck_assert_int_eq(kill((pid_t)p.worker, SIGKILL), 0);
    int status = wait_exit(p.pid, 10000);
    ck_assert_msg(status != -1, "the supervisor kept restarting the worker");
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    static char err[32768];
    read_err(&p, err, sizeof err);
    char want[128];
    snprintf(want, sizeof want, "%d workers in a row failed at start (within 1000 ms",
             SP_DAEMON_CRASH_LOOP);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_msg(strstr(err, "giving up (last: exited with status 1)"), "got: %s", err);
    close_proc(&p);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("daemon_supervise");
    TCase *tc = SP_TEST_CASE(s, "spindled", 60, setup, teardown, serves_http_and_echo,
                             second_instance_refused_by_pid_lock,
                             worker_killed_is_restarted,
                             sigterm_finishes_inflight_requests,
                             sighup_changes_keepalive_timeout,
                             echo_idle_timeout_from_config_and_reload,
                             status_counts_lost_log_lines,
                             bad_reload_keeps_old_configuration,
                             shipped_config_second_instance_refused,
                             detached_start_on_busy_port_exits_1,
                             reuse_port_shares_a_port_when_asked,
                             supervisor_killed_takes_worker_down,
                             crash_loop_stops_restarts);
    tcase_add_unchecked_fixture(tc, make_base, remove_base);
    return sp_test_run(s);
}
