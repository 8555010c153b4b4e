/* spindled's command line run to its end: --print-config, configuration
 * errors with their locations, -d with its pid file, and pid files refused
 * (a link, a directory writable by others). */
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

START_TEST(print_config_shows_sources_and_precedence)
{
    write_config("");
    char text[512];
    snprintf(text, sizeof text,
             "spindle:\n  workers: 3\nhttp:\n  max_conns: 10\n  max_body: 2MiB\n"
             "  server_name: file\n");
    write_file(conf_path, text);
    /* file < env < command line */
    setenv("SPINDLE_SPINDLE_WORKERS", "4", 1);
    setenv("SPINDLE_HTTP_SERVER_NAME", "env", 1);
    const char *args[] = {"-c", conf_path, "-s", "http.server_name=cli", "--print-config",
                          NULL};
    static char out[16384];
    char err[1024];
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    char want[256];
    snprintf(want, sizeof want, "http.max_conns: 10  # %s:4:", conf_path);
    ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
    ck_assert_ptr_nonnull(strstr(out, "spindle.workers: 4  # env SPINDLE_SPINDLE_WORKERS"));
    ck_assert_ptr_nonnull(strstr(out, "http.server_name: cli  # cli"));
    ck_assert_ptr_nonnull(strstr(out, "http.keepalive_timeout: 1m  # default"));
    ck_assert_ptr_nonnull(strstr(out, "log.level: "));
    ck_assert_int_ne(access(pid_path, F_OK), 0); /* nothing was started */
}
END_TEST

START_TEST(bad_config_names_file_line_column)
{
    write_file(conf_path, "http:\n  max_conns: lots\n");
    const char *args[] = {"-c", conf_path, NULL};
    char out[512], err[2048], want[256];
    ck_assert_int_ne(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s:2:14: ", conf_path);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    /* Malformed YAML too. */
    write_file(conf_path, "http: [unclosed\n");
    ck_assert_int_ne(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s:", conf_path);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
}
END_TEST


START_TEST(detached_daemon_holds_pid_file)
{
    write_config("");
    const char *args[] = {"-c", conf_path, "-d", NULL};
    char out[512], err[1024];
    /* The original process exits 0 once the daemon holds the pid file. */
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    long pid = sp_daemon_read_pid(pid_path);
    ck_assert_int_gt(pid, 0);
    track((pid_t)pid, true);
    ck_assert_int_eq(kill((pid_t)pid, 0), 0);
    /* A second one is refused, also when it would detach. */
    ck_assert_int_ne(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(err, pid_path), "no pid file in: %s", err);
    ck_assert_int_eq(kill((pid_t)pid, SIGTERM), 0);
    ck_assert_msg(await_gone((pid_t)pid, 20000), "the daemon did not stop");
    track((pid_t)pid, false);
    ck_assert_int_ne(access(pid_path, F_OK), 0);
}
END_TEST


/* ---- the pid file ------------------------------------------------------------ */

static bool file_holds(const char *path, const char *text)
{
    char buf[64] = "";
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

START_TEST(pid_file_link_refused)
{
    char target[160], out[512], err[2048];
    snprintf(target, sizeof target, "%s/precious", dir);
    write_file(target, "keep\n");
    write_config("");
    const char *args[] = {"-c", conf_path, NULL};
    ck_assert_int_eq(symlink(target, pid_path), 0);
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "refused: it is a symbolic link"), "got: %s", err);
    ck_assert(file_holds(target, "keep\n"));
    ck_assert_int_eq(unlink(pid_path), 0);
    ck_assert_int_eq(link(target, pid_path), 0);
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "single link"), "got: %s", err);
    ck_assert(file_holds(target, "keep\n"));
}
END_TEST

START_TEST(pid_file_directory_writable_by_others_refused)
{
    char pub[128], pid_arg[192], out[512], err[2048];
    snprintf(pub, sizeof pub, "%s/pub", dir);
    ck_assert_int_eq(mkdir(pub, 0755), 0);
    ck_assert_int_eq(chmod(pub, 0777), 0);
    snprintf(pid_arg, sizeof pid_arg, "spindle.pid_file=%s/spindled.pid", pub);
    write_config("");
    const char *args[] = {"-c", conf_path, "-s", pid_arg, NULL};
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "writable by others and not sticky"), "got: %s", err);
    /* Sticky, like /tmp: nobody else can remove or rename our file. */
    ck_assert_int_eq(chmod(pub, 01777), 0);
    proc_t p;
    spawn(&p, args);
    ck_assert_msg(await_worker(&p, now_ms() + 10000), "spindled did not start");
    stop_daemon(&p);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("daemon_cli");
    TCase *tc = SP_TEST_CASE(s, "spindled", 60, setup, teardown,
                             print_config_shows_sources_and_precedence,
                             bad_config_names_file_line_column,
                             detached_daemon_holds_pid_file, pid_file_link_refused,
                             pid_file_directory_writable_by_others_refused);
    tcase_add_unchecked_fixture(tc, make_base, remove_base);
    return sp_test_run(s);
}
