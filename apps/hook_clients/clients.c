/* The hiredis and libcurl demos, and the delaying HTTP server; see
 * clients.h. Nothing here knows about spindle's hooks: the client libraries
 * make their usual blocking calls, and only where those calls run (fibers
 * on an IOManager worker) decides that they park instead of blocking. */
#include "clients.h"
#include "run.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <hiredis/hiredis.h>

/* ---- hiredis ------------------------------------------------------------ */

static bool redis_request(const hc_run_t *r, int index, char *err, size_t errlen)
{
    redisContext *c = redisConnect(r->host, r->port);
    if (!c || c->err) {
        snprintf(err, errlen, "redisConnect: %s", c ? c->errstr : "out of memory");
        redisFree(c);
        return false;
    }
    /* A key of its own that nobody pushes to: redis parks this client for
     * block_ms, serves the others meanwhile, then answers nil. */
    char key[64], timeout[32];
    snprintf(key, sizeof key, "spindle:hook-clients:%ld:%d", (long)getpid(), index);
    snprintf(timeout, sizeof timeout, "%d.%03d", r->delay_ms / 1000, r->delay_ms % 1000);
    redisReply *reply = redisCommand(c, "BLPOP %s %s", key, timeout);
    bool ok = reply && reply->type == REDIS_REPLY_NIL;
    if (!reply)
        snprintf(err, errlen, "BLPOP: %s", c->errstr);
    else if (!ok)
        snprintf(err, errlen, "BLPOP: reply of type %d, not nil: %s", reply->type,
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "");
    freeReplyObject(reply);
    redisFree(c);
    return ok;
}

int hc_redis_run(const char *host, int port, int fibers, int block_ms,
                 hc_result_t *out)
{
    hc_run_t r = {.request = redis_request, .host = host, .port = port,
                  .delay_ms = block_ms, .out = out};
    return hc_run_fibers(&r, fibers);
}

/* ---- libcurl ------------------------------------------------------------ */

static size_t count_body(char *data, size_t size, size_t nmemb, void *user)
{
    (void)data;
    *(size_t *)user += size * nmemb;
    return size * nmemb;
}

static bool curl_request(const hc_run_t *r, int index, char *err, size_t errlen)
{
    (void)index;
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errlen, "curl_easy_init failed");
        return false;
    }
    char curl_err[CURL_ERROR_SIZE] = "";
    size_t body = 0;
    curl_easy_setopt(h, CURLOPT_URL, r->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never an http_proxy from the environment */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, count_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "curl_easy_perform: %s",
                 curl_err[0] ? curl_err : curl_easy_strerror(rc));
        return false;
    }
    if (status != 200) {
        snprintf(err, errlen, "HTTP status %ld", status);
        return false;
    }
    return true;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int hc_curl_run(const char *url, int fibers, hc_result_t *out)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        memset(out, 0, sizeof *out);
        snprintf(out->error, sizeof out->error, "curl_global_init: %s",
                 curl_easy_strerror(curl_init_rc));
        return -EIO;
    }
    hc_run_t r = {.request = curl_request, .url = url, .out = out};
    return hc_run_fibers(&r, fibers);
}

/* ---- the delaying HTTP server ------------------------------------------- */

struct hc_http_server {
    int lfd;
    int port;
    int delay_ms;
    pthread_t acceptor;
    pthread_mutex_t lock;
    pthread_cond_t idle; /* active dropped to 0 */
    int active;          /* connections accepted and not yet closed */
    int peak;
    unsigned long served;
};

typedef struct conn {
    hc_http_server_t *srv;
    int fd;
} conn_t;

static const char response[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: text/plain\r\n"
                               "Content-Length: 3\r\n"
                               "Connection: close\r\n"
                               "\r\n"
                               "ok\n";

static bool write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* Read the request head (a client that sends none is dropped after the
 * socket's 5 s timeout), wait delay_ms, answer, close. */
static void *serve_conn(void *arg)
{
    conn_t *c = arg;
    hc_http_server_t *s = c->srv;
    int fd = c->fd;
    free(c);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char head[4096];
    size_t have = 0;
    bool complete = false;
    while (!complete && have < sizeof head - 1) {
        ssize_t n = read(fd, head + have, sizeof head - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        head[have] = '\0';
        complete = strstr(head, "\r\n\r\n") != NULL;
    }
    bool sent = false;
    if (complete) {
        struct timespec d = {s->delay_ms / 1000, (long)(s->delay_ms % 1000) * 1000000L};
        while (nanosleep(&d, &d) != 0 && errno == EINTR) {
        }
        sent = write_all(fd, response, sizeof response - 1);
    }
    close(fd);
    pthread_mutex_lock(&s->lock);
    s->served += sent;
    if (--s->active == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void *accept_loop(void *arg)
{
    hc_http_server_t *s = arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* EINVAL once hc_http_server_stop shut the listener */
        }
        conn_t *c = malloc(sizeof *c);
        pthread_t t;
        pthread_mutex_lock(&s->lock);
        if (++s->active > s->peak)
            s->peak = s->active;
        pthread_mutex_unlock(&s->lock);
        if (c) {
            *c = (conn_t){s, fd};
            if (pthread_create(&t, &attr, serve_conn, c) == 0)
                continue;
        }
        free(c);
        close(fd);
        pthread_mutex_lock(&s->lock);
        if (--s->active == 0)
            pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->lock);
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

hc_http_server_t *hc_http_server_start(int delay_ms)
{
    hc_http_server_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->delay_ms = delay_ms;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->idle, &ca);
    pthread_condattr_destroy(&ca);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int err;
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(s->lfd, 1024) < 0 ||
        getsockname(s->lfd, (struct sockaddr *)&a, &len) < 0) {
        err = errno;
        goto fail;
    }
    s->port = ntohs(a.sin_port);
    err = pthread_create(&s->acceptor, NULL, accept_loop, s);
    if (err == 0)
        return s;
fail:
    if (s->lfd >= 0)
        close(s->lfd);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    free(s);
    errno = err;
    return NULL;
}

int hc_http_server_port(const hc_http_server_t *s)
{
    return s->port;
}

/* Lock held: wait until no connection is open (they end within their
 * socket timeouts plus the delay). True if none is. */
static bool wait_idle(hc_http_server_t *s)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 15 + s->delay_ms / 1000;
    int rc = 0;
    while (s->active > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->idle, &s->lock, &deadline);
    return s->active == 0;
}

void hc_http_server_counts(hc_http_server_t *s, unsigned long *served, int *peak)
{
    /* A client has its answer before the thread that sent it counts it:
     * the counts are final once the connections in flight have ended. */
    pthread_mutex_lock(&s->lock);
    wait_idle(s);
    *served = s->served;
    *peak = s->peak;
    pthread_mutex_unlock(&s->lock);
}

void hc_http_server_stop(hc_http_server_t *s)
{
    if (!s)
        return;
    shutdown(s->lfd, SHUT_RDWR); /* Linux: a blocked accept returns EINVAL */
    pthread_join(s->acceptor, NULL);
    close(s->lfd);
    pthread_mutex_lock(&s->lock);
    bool idle = wait_idle(s);
    pthread_mutex_unlock(&s->lock);
    if (!idle) {
        /* A connection thread still holds s: leave it allocated. */
        fprintf(stderr, "hook-clients: HTTP server stopped with connections open\n");
        return;
    }
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
