/* The MariaDB demo (MariaDB Connector/C, libmariadb); see clients.h. Like
 * the others, it knows nothing of spindle: the library connects, reads and
 * writes with its ordinary blocking calls. */
#include "clients.h"
#include "run.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <mysql.h>

static bool mariadb_request(const hc_run_t *r, int index, char *err, size_t errlen)
{
    (void)index;
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        snprintf(err, errlen, "mysql_init: out of memory");
        return false;
    }
    unsigned int connect_s = 20; /* a dead server fails the run, not hangs it */
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
    bool ok = false;
    char query[64];
    snprintf(query, sizeof query, "SELECT SLEEP(%d.%03d)", r->delay_ms / 1000,
             r->delay_ms % 1000);
    if (!mysql_real_connect(m, r->host, "root", NULL, NULL, (unsigned)r->port, NULL, 0)) {
        snprintf(err, errlen, "mysql_real_connect: %s", mysql_error(m));
    } else if (mysql_query(m, query) != 0) {
        snprintf(err, errlen, "%s: %s", query, mysql_error(m));
    } else {
        /* SLEEP() answers 0 when it slept the whole time. */
        MYSQL_RES *res = mysql_store_result(m);
        MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
        ok = row && row[0] && !strcmp(row[0], "0");
        if (!ok)
            snprintf(err, errlen, "%s: %s", query,
                     !res ? mysql_error(m) : row && row[0] ? row[0] : "no row");
        mysql_free_result(res);
    }
    mysql_close(m);
    return ok;
}

static pthread_once_t mariadb_once = PTHREAD_ONCE_INIT;
static int mariadb_init_rc;

/* mysql_init() would do this itself, but not safely from many threads. */
static void mariadb_init(void)
{
    mariadb_init_rc = mysql_library_init(0, NULL, NULL);
}

int hc_mariadb_run(const char *host, int port, int fibers, int sleep_ms,
                   const hc_stall_t *stall, hc_result_t *out)
{
    pthread_once(&mariadb_once, mariadb_init);
    if (mariadb_init_rc != 0) {
        memset(out, 0, sizeof *out);
        snprintf(out->error, sizeof out->error, "mysql_library_init failed");
        return -EIO;
    }
    hc_run_t r = {.request = mariadb_request, .host = host, .port = port,
                  .delay_ms = sleep_ms, .stall = stall, .out = out};
    return hc_run_fibers(&r, fibers);
}
