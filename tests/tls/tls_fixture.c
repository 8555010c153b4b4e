/* The TLS tests' fixture: see tls_fixture.h. */
#include "tls_fixture.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char dir[256];

void tls_certs_make(void)
{
    snprintf(dir, sizeof dir, "/tmp/sp-tls-XXXXXX");
    char cmd[600];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(cmd, sizeof cmd, "sh %s %s %s", SP_TLS_CERTS_SH, SP_OPENSSL, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s failed\n", cmd);
        exit(1);
    }
}

void tls_certs_remove(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) /* outside the tests: nothing to fail */
        fprintf(stderr, "%s failed\n", cmd);
}

int tls_suite_run(Suite *s)
{
    int rc = sp_test_run(s);
    tls_certs_remove();
    return rc;
}

const char *tls_file(const char *name)
{
    static char paths[8][320];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

void tls_server_opts(sp_tls_server_opts_t *o, sp_tls_cert_t *certs, const char *const *names,
                     int n)
{
    for (int i = 0; i < n; i++) {
        char f[32];
        snprintf(f, sizeof f, "%s.pem", names[i]);
        certs[i].cert_file = tls_file(f);
        snprintf(f, sizeof f, "%s.key", names[i]);
        certs[i].key_file = tls_file(f);
    }
    *o = (sp_tls_server_opts_t){.certs = certs, .ncerts = n};
}

static tls_result_t classify(int rc)
{
    switch (rc) {
    case 0:
        return TLS_OK;
    case -ETIMEDOUT:
        return TLS_TIMEDOUT;
    case SP_TLS_EHANDSHAKE:
        return TLS_HANDSHAKE;
    case -ECONNRESET:
    case -EPIPE:
        return TLS_GONE;
    default:
        return TLS_OTHER;
    }
}

static void info(sp_tls_conn_t *c)
{
    char line[256];
    const char *sni = sp_tls_server_name(c), *alpn = sp_tls_alpn(c);
    int n = snprintf(line, sizeof line, "version=%s alpn=%s sni=%s reused=%d\n",
                     sp_tls_version(c), alpn ? alpn : "-", sni ? sni : "-",
                     sp_tls_session_reused(c));
    sp_tls_write(c, line, (size_t)n, 10000000);
}

static void send_file(tls_server_t *s, sp_tls_conn_t *c, const char *cmd)
{
    long long off, len;
    ssize_t rc = -EINVAL;
    pthread_mutex_lock(&s->lock);
    int fd = s->file_fd;
    pthread_mutex_unlock(&s->lock);
    if (sscanf(cmd, "?file %lld %lld", &off, &len) == 2)
        rc = sp_tls_sendfile(c, fd, (off_t)off, (size_t)len, 10000000);
    pthread_mutex_lock(&s->lock);
    s->file_rc = rc;
    pthread_mutex_unlock(&s->lock);
}

static void serve(tls_server_t *s, sp_tls_conn_t *c)
{
    char buf[16384];
    ssize_t n;
    while ((n = sp_tls_read(c, buf, sizeof buf - 1, 30000000)) > 0) {
        if (n >= 5 && memcmp(buf, "?info", 5) == 0) {
            info(c);
            return;
        }
        if (n >= 5 && memcmp(buf, "?file", 5) == 0) {
            buf[n] = '\0';
            send_file(s, c, buf);
            return;
        }
        if (sp_tls_write(c, buf, (size_t)n, 10000000) != n)
            return;
    }
}

static void handle(int fd, const sp_addr_t *peer, void *arg)
{
    (void)peer;
    tls_server_t *s = arg;
    pthread_mutex_lock(&s->lock);
    int sndbuf = s->sndbuf;
    pthread_mutex_unlock(&s->lock);
    if (sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    sp_tls_conn_t *c;
    int rc = sp_tls_accept(s->cfg, fd, 0, &c);
    if (rc == 0) {
        pthread_mutex_lock(&s->lock);
        s->ktls_sends += sp_tls_ktls_send(c);
        pthread_mutex_unlock(&s->lock);
        serve(s, c);
        sp_tls_shutdown(c, 1000000);
        sp_tls_free(c);
    }
    pthread_mutex_lock(&s->lock);
    s->results[classify(rc)]++;
    s->finished++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void tls_server_start(tls_server_t *s, const sp_tls_server_opts_t *o, int threads)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->cfg = sp_tls_server_config(o);
    ck_assert_msg(s->cfg, "config: %s (%s)", strerror(errno), sp_tls_error_reason());
    s->io = sp_iomanager_create("tls", threads, false);
    ck_assert_ptr_nonnull(s->io);
    s->srv = sp_tcp_server_create(s->io, handle, s, NULL);
    ck_assert_ptr_nonnull(s->srv);
    ck_assert_int_eq(sp_addr_parse("127.0.0.1:0", &s->addr), 0);
    ck_assert_int_eq(sp_tcp_server_listen(s->srv, &s->addr), 0);
    ck_assert_int_eq(sp_iomanager_start(s->io), 0);
    ck_assert_int_eq(sp_tcp_server_start(s->srv), 0);
    ck_assert_int_eq(sp_tcp_server_addr(s->srv, 0, &s->addr), 0);
    s->port = sp_addr_port(&s->addr);
}

void tls_server_stop(tls_server_t *s)
{
    ck_assert_int_eq(sp_tcp_server_stop(s->srv, 1000000), 0);
    ck_assert_int_eq(sp_iomanager_stop(s->io), 0);
    sp_tcp_server_destroy(s->srv);
    sp_iomanager_destroy(s->io);
    sp_tls_config_free(s->cfg);
}

void tls_server_set(tls_server_t *s, int file_fd, int sndbuf)
{
    pthread_mutex_lock(&s->lock);
    s->file_fd = file_fd;
    s->sndbuf = sndbuf;
    pthread_mutex_unlock(&s->lock);
}

bool tls_server_wait(tls_server_t *s, int n, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    while (s->finished < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->cond, &s->lock, &until);
    bool done = s->finished >= n;
    pthread_mutex_unlock(&s->lock);
    return done;
}

int tls_server_count(tls_server_t *s, tls_result_t r)
{
    pthread_mutex_lock(&s->lock);
    int n = s->results[r];
    pthread_mutex_unlock(&s->lock);
    return n;
}

int tls_run(const char *cmd, char *out, size_t size)
{
    char full[2048];
    snprintf(full, sizeof full, "timeout 60 %s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = 0, got;
    while (n + 1 < size && (got = fread(out + n, 1, size - 1 - n, p)) > 0)
        n += got;
    out[n] = '\0';
    char drain[512];
    while (fread(drain, 1, sizeof drain, p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void tls_python(const tls_server_t *s, const char *args, char *out, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 %s --port %d --ca %s %s", SP_TLS_CLIENT_PY, s->port,
             tls_file("ca1.pem"), args);
    int rc = tls_run(cmd, out, size);
    ck_assert_msg(rc == 0, "%s: exit %d:\n%s", cmd, rc, out);
}

void tls_has(const char *out, const char *what)
{
    ck_assert_msg(strstr(out, what), "no \"%s\" in:\n%s", what, out);
}

int tls_tcp_client(const tls_server_t *s)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (const struct sockaddr *)&s->addr.ss, s->addr.len), 0);
    return fd;
}
