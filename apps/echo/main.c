/* spindle-echo: an echo server whose handler is a plain read/write loop.
 *
 *   spindle-echo --listen 127.0.0.1:9000 [--listen unix:/tmp/e.sock]
 *                [--workers N] [--max-conns N]
 *
 * Prints "listening on ADDR" for each address (port 0 shows the port the
 * kernel chose). SIGINT/SIGTERM stop it gracefully: no new connections,
 * open ones get 5 s to finish, then exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>

#include "apps_common.h"

enum { MAX_LISTEN = 8 };

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --listen ADDR [--listen ADDR]... [--workers N] [--max-conns N]\n"
            "  ADDR: 127.0.0.1:9000, [::1]:9000, unix:/path\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *listen[MAX_LISTEN];
    int nlisten = 0, workers = 1, max_conns = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--listen") && i + 1 < argc && nlisten < MAX_LISTEN)
            listen[nlisten++] = argv[++i];
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-conns") && i + 1 < argc)
            max_conns = atoi(argv[++i]);
        else
            usage(argv[0]);
    }
    if (!nlisten || workers < 1)
        usage(argv[0]);

    /* Signals go to this thread only (sigwait below); workers inherit the
     * blocked mask. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    sp_iomanager_t *io = sp_iomanager_create("echo", workers, false);
    if (!io) {
        perror("spindle-echo: iomanager");
        return 1;
    }
    sp_tcp_server_opts_t opts = {.max_conns = max_conns, .nodelay = true};
    sp_tcp_server_t *srv = sp_tcp_server_create(io, app_echo, NULL, &opts);
    if (app_listen_all(&app_tcp_ops, srv, listen, (size_t)nlisten, "spindle-echo:") < 0)
        return 2;
    int rc = sp_iomanager_start(io);
    if (rc == 0)
        rc = sp_tcp_server_start(srv);
    if (rc < 0) {
        fprintf(stderr, "spindle-echo: %s\n", strerror(-rc));
        return 1;
    }
    app_print_all(&app_tcp_ops, srv, NULL);
    fflush(stdout);

    int sig;
    sigwait(&stop_signals, &sig);
    sp_tcp_server_stop(srv, 5 * 1000000);
    sp_iomanager_stop(io);
    sp_tcp_server_stats_t st;
    sp_tcp_server_stats(srv, &st);
    fprintf(stderr, "spindle-echo: stopped (%s); %llu connections served, %llu refused\n",
            strsignal(sig), (unsigned long long)st.accepted,
            (unsigned long long)st.refused);
    sp_tcp_server_destroy(srv);
    sp_iomanager_destroy(io);
    return 0;
}
