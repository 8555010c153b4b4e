/* spindle-echo: an echo server whose handler is a plain read/write loop.
 *
 *   spindle-echo --listen 127.0.0.1:9000 [--listen unix:/tmp/e.sock]
 *                [--workers N] [--max-conns N] [--idle-timeout MS]
 *                [--write-timeout MS]
 *
 * Prints "listening on ADDR" for each address (port 0 shows the port the
 * kernel chose). SIGINT/SIGTERM stop it gracefully: no new connections,
 * open ones get 5 s to finish, then exit 0. --workers counts the main
 * thread, which serves too: with 1 the process is single-threaded.
 * Without --max-conns the limit comes from the open-file limit
 * (sp_tcp_default_max_conns). A connection is closed when nothing arrives
 * for --idle-timeout (60 s) or a write back stalls for --write-timeout
 * (30 s): a client that sends without reading, or sends nothing, does not
 * hold its fd and fiber forever. 0 turns either off; with both off the
 * echo loop marks nothing at all.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>

#include "apps_common.h"

enum { MAX_LISTEN = 8, IDLE_MS = 60000, WRITE_MS = 30000 };

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --listen ADDR [--listen ADDR]... [--workers N] [--max-conns N]\n"
            "          [--idle-timeout MS] [--write-timeout MS]\n"
            "  N: --workers >= 1 (threads, the main one included); --max-conns >= 0 (0: no limit;\n"
            "     default: from the open-file limit)\n"
            "  MS: milliseconds >= 0 (0: none); defaults 60000 and 30000\n"
            "  ADDR: 127.0.0.1:9000, [::1]:9000, unix:/path\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *listen[MAX_LISTEN];
    int nlisten = 0, workers = 1, max_conns = 0; /* 0: the library's default */
    int idle_ms = IDLE_MS, write_ms = WRITE_MS;
    for (int i = 1; i < argc; i++) {
        bool ok = true, more = i + 1 < argc;
        if (!strcmp(argv[i], "--listen") && more && nlisten < MAX_LISTEN)
            listen[nlisten++] = argv[++i];
        else if (!strcmp(argv[i], "--workers") && more)
            ok = app_parse_int(argv[++i], 1, INT_MAX, &workers);
        else if (!strcmp(argv[i], "--max-conns") && more)
            ok = app_parse_max_conns(argv[++i], &max_conns);
        else if (!strcmp(argv[i], "--idle-timeout") && more)
            ok = app_parse_int(argv[++i], 0, INT_MAX, &idle_ms);
        else if (!strcmp(argv[i], "--write-timeout") && more)
            ok = app_parse_int(argv[++i], 0, INT_MAX, &write_ms);
        else
            ok = false;
        if (!ok)
            usage(argv[0]);
    }
    if (!nlisten)
        usage(argv[0]);

    sigset_t stop_signals;
    app_block_stop_signals(&stop_signals);

    sp_iomanager_t *io = sp_iomanager_create("echo", workers, true);
    if (!io) {
        perror("spindle-echo: iomanager");
        return 1;
    }
    sp_tcp_server_opts_t opts = {.max_conns = max_conns, .nodelay = true};
    app_echo_t *echo = app_echo_create(io, idle_ms, write_ms);
    sp_tcp_server_t *srv = echo ? sp_tcp_server_create(io, app_echo, echo, &opts) : NULL;
    if (!srv) {
        perror("spindle-echo: server");
        return 1;
    }
    int sig;
    int status = app_serve(&app_tcp_ops, srv, io, listen, (size_t)nlisten, "spindle-echo:",
                           &stop_signals, 5 * 1000000, &sig);
    if (status)
        return status;
    sp_tcp_server_stats_t st;
    sp_tcp_server_stats(srv, &st);
    fprintf(stderr, "spindle-echo: stopped (%s); %llu connections served, %llu refused\n",
            strsignal(sig), (unsigned long long)st.accepted,
            (unsigned long long)st.refused);
    sp_tcp_server_destroy(srv);
    sp_iomanager_destroy(io);
    app_echo_destroy(echo);
    return 0;
}
