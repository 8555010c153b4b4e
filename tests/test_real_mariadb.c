/* MariaDB's client library (Connector/C, libmariadb), which nobody here
 * wrote, through its synchronous API: 200 fibers on ONE IOManager worker
 * each connect to a mariadbd this test starts and run SELECT SLEEP(0.2).
 *
 *  - The requests overlap: all 200 take about one request's time, not 40 s
 *    (the same bound as test_real_clients).
 *  - Without timing: with the server stopped (SIGSTOP), all 200 fibers
 *    start their connect and park waiting for the server's greeting while
 *    one more fiber on the same worker still runs and sees them parked; it
 *    then resumes the server (SIGCONT) and every query succeeds.
 *
 * The server: once per test program, in a private temporary datadir, on a
 * free 127.0.0.1 port and a socket in that datadir, with --no-defaults
 * (no system configuration, never /var/lib/mysql) and --skip-grant-tables
 * (no system tables needed, so no mariadb-install-db). Built twice, like
 * test_hooks: hooks linked in, and with LD_PRELOAD=libspindle_preload.so. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clients.h"
#include "real_check.h"
#include "real_server.h"

#include "testutil.h"

#ifndef SP_MARIADBD
#define SP_MARIADBD "/usr/sbin/mariadbd"
#endif

enum { FIBERS = 200, SLEEP_MS = 200 };

static rs_server_t db;
static int db_port;
static char db_dir[96]; /* its socket path must fit in sun_path */

static bool mariadb_spawn(int port)
{
    char datadir[128], sock[128], pidfile[128], tmpdir[128], port_s[32];
    snprintf(datadir, sizeof datadir, "--datadir=%s", db_dir);
    snprintf(tmpdir, sizeof tmpdir, "--tmpdir=%s", db_dir);
    snprintf(sock, sizeof sock, "--socket=%s/mysqld.sock", db_dir);
    snprintf(pidfile, sizeof pidfile, "--pid-file=%s/mariadbd.pid", db_dir);
    snprintf(port_s, sizeof port_s, "--port=%d", port);
    char *argv[] = {SP_MARIADBD, "--no-defaults", datadir, tmpdir, sock, pidfile,
                    port_s, "--bind-address=127.0.0.1", "--skip-grant-tables",
                    "--skip-name-resolve", "--max-connections=400", "--back-log=512",
                    /* small and quick to create: the test stores nothing */
                    "--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M",
                    "--innodb-use-native-aio=0",
                    /* it refuses to run as root without this */
                    geteuid() == 0 ? "--user=root" : NULL, NULL};
    return rs_start(&db, argv, "ready for connections", 30000);
}

/* Unchecked fixture: once, in Check's parent process; a test fails with
 * db.error if this did not work. */
static void mariadb_start(void)
{
    if (!rs_make_dir(db_dir, sizeof db_dir, "spindle-mariadb")) {
        snprintf(db.error, sizeof db.error, "datadir: %s", strerror(errno));
        db_dir[0] = '\0';
        return;
    }
    db_port = rs_start_on_free_port(&db, mariadb_spawn);
}

static void mariadb_stop(void)
{
    rs_stop(&db);
    if (db_dir[0])
        rs_remove_dir(db_dir);
}

START_TEST(mariadb_200_fibers_overlap)
{
    ck_assert_msg(db.pid > 0, "%s", db.error);
    hc_result_t one, many;
    ck_assert_int_eq(hc_mariadb_run("127.0.0.1", db_port, 1, SLEEP_MS, NULL, &one), 0);
    ck_assert_int_eq(hc_mariadb_run("127.0.0.1", db_port, FIBERS, SLEEP_MS, NULL, &many), 0);
    rc_check_overlap("mariadb", FIBERS, SLEEP_MS, &one, &many);
}
END_TEST

START_TEST(mariadb_200_connects_park_on_a_stopped_server)
{
    ck_assert_msg(db.pid > 0, "%s", db.error);
    hc_result_t one, many;
    ck_assert_int_eq(hc_mariadb_run("127.0.0.1", db_port, 1, 0, NULL, &one), 0);
    hc_stall_t stall = {rc_resume_server, &db.pid};
    rc_stop_server(db.pid, &one);
    ck_assert_int_eq(hc_mariadb_run("127.0.0.1", db_port, FIBERS, SLEEP_MS, &stall, &many), 0);
    rc_check_stalled("mariadb", FIBERS, &many);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("real_mariadb");
    TCase *tc = tcase_create("mariadb");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, mariadb_start, mariadb_stop);
    tcase_add_test(tc, mariadb_200_fibers_overlap);
    tcase_add_test(tc, mariadb_200_connects_park_on_a_stopped_server);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
