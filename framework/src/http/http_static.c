/* Static files: GET/HEAD of the files under a root directory, sent with
 * sendfile(2); Last-Modified / If-Modified-Since, single byte ranges
 * (with If-Range).
 *
 * No request may reach outside the root. Two checks, both needed:
 *   - any ".." segment of the decoded path is refused (403) before the file
 *     system is asked, so "/../etc/passwd" and "/%2e%2e/x" never resolve
 *     (the request decoder already refused NUL bytes);
 *   - the path is resolved with realpath(3), which follows every symbolic
 *     link, and the result must still lie under the root's own real path;
 *     a link pointing outside gives 403. The resolved path is then opened
 *     with O_NOFOLLOW, so its last component cannot have been swapped for a
 *     link since. (Directories of the root replaced by links between the
 *     two calls are not defended against: the root is assumed not to be
 *     writable by those who send the requests.)
 * A directory's index is looked up the same way (its path resolved).
 * Opening with O_NONBLOCK keeps a FIFO in the tree from blocking the worker;
 * anything but a regular file or a directory is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http_internal.h"

struct sp_http_static {
    char *root; /* real path, no trailing slash (except "/") */
    size_t root_len;
    char *strip;
    size_t strip_len;
    char *index;
    int max_age;
};

sp_http_static_t *sp_http_static_create(const char *root, const sp_http_static_opts_t *opts)
{
    sp_http_static_t *st = calloc(1, sizeof *st);
    struct stat sb;
    if (!st)
        goto nomem;
    if (!(st->root = realpath(root, NULL)))
        goto err;
    if (stat(st->root, &sb) < 0)
        goto err;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        goto err;
    }
    st->root_len = strlen(st->root);
    const char *strip = opts && opts->strip_prefix ? opts->strip_prefix : "";
    const char *index = opts && opts->index ? opts->index : "index.html";
    st->strip = strdup(strip);
    st->strip_len = strlen(strip);
    st->index = strdup(index);
    st->max_age = opts ? opts->max_age : 0;
    if (!st->strip || !st->index || strchr(index, '/'))
        goto nomem;
    return st;
nomem:
    errno = ENOMEM;
err:;
    int err = errno;
    sp_http_static_destroy(st);
    errno = err;
    return NULL;
}

void sp_http_static_destroy(sp_http_static_t *st)
{
    if (!st)
        return;
    free(st->root);
    free(st->strip);
    free(st->index);
    free(st);
}

/* ---- MIME types --------------------------------------------------------- */

static const struct {
    const char *ext, *type;
} mime[] = {
    {"html", "text/html; charset=utf-8"},  {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},          {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"}, {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},            {"svg", "image/svg+xml"},
    {"png", "image/png"},                  {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},                {"gif", "image/gif"},
    {"webp", "image/webp"},                {"avif", "image/avif"},
    {"ico", "image/x-icon"},               {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},          {"woff", "font/woff"},
    {"woff2", "font/woff2"},               {"ttf", "font/ttf"},
    {"mp4", "video/mp4"},                  {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},                 {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},                  {"zip", "application/zip"},
    {"gz", "application/gzip"},            {"tar", "application/x-tar"},
};

const char *sp_http_mime_type(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash : path, '.');
    if (dot)
        for (size_t i = 0; i < sizeof mime / sizeof mime[0]; i++)
            if (!strcasecmp(dot + 1, mime[i].ext))
                return mime[i].type;
    return "application/octet-stream";
}

/* ---- ranges ------------------------------------------------------------- */

/* Digits, saturating at UINT64_MAX: a position past any file is still a
 * position (416 for a first byte, "to the end" for a last one). */
static bool parse_num(const char **s, uint64_t *out)
{
    const char *p = *s;
    uint64_t v = 0;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
    }
    *s = p;
    *out = v;
    return true;
}

enum { RANGE_NONE, RANGE_OK, RANGE_UNSATISFIABLE };

/* One "bytes=first-last", "bytes=first-" or "bytes=-suffix" range of a file
 * of `size` bytes. Anything else (several ranges, other units, bad syntax)
 * is ignored as RFC 7233 allows: the whole file is sent. */
static int parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    if (!h || strncasecmp(h, "bytes=", 6) || strchr(h, ','))
        return RANGE_NONE;
    const char *p = h + 6;
    uint64_t first = 0, last = UINT64_MAX;
    bool has_first = parse_num(&p, &first);
    if (*p++ != '-')
        return RANGE_NONE;
    bool has_last = parse_num(&p, &last);
    if (*p || (!has_first && !has_last) || (has_first && has_last && last < first))
        return RANGE_NONE;
    if (!has_first) { /* the last `last` bytes */
        if (size == 0)
            return RANGE_NONE; /* all of nothing: 200 (RFC 9110 14.1.1) */
        if (last == 0)
            return RANGE_UNSATISFIABLE;
        first = last >= size ? 0 : size - last;
        last = size - 1;
    }
    if (first >= size)
        return RANGE_UNSATISFIABLE;
    if (last >= size)
        last = size - 1;
    *off = first;
    *len = last - first + 1;
    return RANGE_OK;
}

/* ---- serving ------------------------------------------------------------ */

static int set_date_header(sp_http_response_t *res, const char *name, time_t t)
{
    char date[SP__HTTP_DATE_LEN + 1];
    sp__http_date_format(t, date);
    return sp_http_response_set_header(res, name, date);
}

static int common_headers(const sp_http_static_t *st, sp_http_response_t *res,
                          const char *name, const struct stat *sb)
{
    int rc = set_date_header(res, "Last-Modified", sb->st_mtime);
    if (rc == 0)
        rc = sp_http_response_set_header(res, "Content-Type", sp_http_mime_type(name));
    if (rc == 0)
        rc = sp_http_response_set_header(res, "Accept-Ranges", "bytes");
    if (rc == 0 && st->max_age > 0) {
        char cc[32];
        snprintf(cc, sizeof cc, "max-age=%d", st->max_age);
        rc = sp_http_response_set_header(res, "Cache-Control", cc);
    }
    return rc;
}

/* If-Modified-Since: a date later than now is invalid and ignored (RFC
 * 9110, 13.1.3), so a client's clock ahead of ours never gets a 304 for a
 * file changed since. */
static bool not_modified(const sp_http_request_t *req, const struct stat *sb)
{
    time_t since = sp__http_date_parse(sp_http_request_header(req, "if-modified-since"));
    return since != (time_t)-1 && since <= time(NULL) && sb->st_mtime <= since;
}

/* If-Range: the range applies only to the file the client has a part of.
 * Its validator must be our Last-Modified exactly; an entity tag never
 * matches (we send none). Without If-Range the range always applies. */
static bool range_applies(const sp_http_request_t *req, const struct stat *sb)
{
    const char *v = sp_http_request_header(req, "if-range");
    return !v || sp__http_date_parse(v) == sb->st_mtime;
}

static int serve_file(const sp_http_static_t *st, sp_http_request_t *req,
                      sp_http_response_t *res, int fd, const char *name,
                      const struct stat *sb)
{
    int rc = common_headers(st, res, name, sb);
    if (rc < 0)
        return rc;
    if (not_modified(req, sb))
        return sp_http_response_set_status(res, 304);
    uint64_t size = (uint64_t)sb->st_size, off = 0, len = size;
    char cr[80];
    const char *range = range_applies(req, sb) ? sp_http_request_header(req, "range") : NULL;
    switch (parse_range(range, size, &off, &len)) {
    case RANGE_UNSATISFIABLE:
        snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)size);
        return sp_http_response_error(res, 416, "Content-Range", cr);
    case RANGE_OK:
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)off,
                 (unsigned long long)(off + len - 1), (unsigned long long)size);
        rc = sp_http_response_set_header(res, "Content-Range", cr);
        if (rc == 0)
            rc = sp_http_response_set_status(res, 206);
        break;
    }
    return rc < 0 ? rc : sp_http_response_sendfile(res, fd, (off_t)off, (size_t)len);
}

/* Does the decoded path have a ".." segment? */
static bool climbs(const char *path)
{
    for (const char *p = path; (p = strstr(p, "..")); p += 2)
        if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
    return false;
}

static int status_of_errno(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
        return 404;
    case EMFILE: /* out of fds or memory: the server's trouble, for now */
    case ENFILE:
    case ENOMEM:
        return 503;
    default:
        return 403;
    }
}

/* Resolve and check a path under the root: an open fd (and *sb), or
 * -status. */
static int open_under_root(const sp_http_static_t *st, const char *rel, struct stat *sb)
{
    char full[PATH_MAX], real[PATH_MAX];
    if (snprintf(full, sizeof full, "%s/%s", st->root, rel) >= (int)sizeof full)
        return -404;
    if (!realpath(full, real))
        return -status_of_errno(errno);
    size_t n = st->root_len == 1 ? 0 : st->root_len; /* root "/" */
    if (strncmp(real, st->root, n) || (real[n] != '/' && real[n] != '\0'))
        return -403;
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -status_of_errno(errno);
    if (fstat(fd, sb) == 0 && (S_ISREG(sb->st_mode) || S_ISDIR(sb->st_mode)))
        return fd;
    close(fd);
    return -403;
}

enum { REDIRECTED = -301 };

/* Bytes a path may carry as they are in a Location (RFC 3986 pchar and
 * '/'); the rest is percent-encoded. */
static bool plain_in_path(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~!$&'()*+,;=:@/", c));
}

/* The directory's address with the slash added: the decoded path encoded
 * again (a '%', '?', '#' or space in a name must not change the meaning),
 * one leading slash (a Location "//host/" would send the client to another
 * site), and the query kept. NULL when out of memory. */
static char *redirect_target(const char *path, const char *query)
{
    while (path[0] == '/' && path[1] == '/')
        path++;
    size_t n = strlen(path), q = strlen(query);
    char *loc = malloc(3 * n + q + 3), *o = loc;
    if (!loc)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (plain_in_path(*p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = "0123456789ABCDEF"[*p >> 4];
            *o++ = "0123456789ABCDEF"[*p & 15];
        }
    }
    *o++ = '/';
    if (q) {
        *o++ = '?';
        memcpy(o, query, q);
        o += q;
    }
    *o = '\0';
    return loc;
}

/* A directory: its index file, after a redirect that adds the slash (so
 * relative links in the index resolve in the directory). The index goes
 * through the same checks as any file, so a link to a file elsewhere under
 * the root serves it and one leading outside is refused. An fd, -status,
 * or REDIRECTED. */
static int open_index(const sp_http_static_t *st, sp_http_response_t *res,
                      const char *rel, const char *path, const char *query,
                      struct stat *sb)
{
    if (path[strlen(path) - 1] != '/') {
        char *loc = redirect_target(path, query);
        if (!loc)
            return -500;
        int rc = sp_http_response_error(res, 301, "Location", loc);
        free(loc);
        return rc < 0 ? -500 : REDIRECTED;
    }
    char name[PATH_MAX];
    if (snprintf(name, sizeof name, "%s%s", rel, st->index) >= (int)sizeof name)
        return -404;
    int fd = open_under_root(st, name, sb);
    if (fd < 0 || S_ISREG(sb->st_mode))
        return fd;
    close(fd); /* a directory called like the index */
    return -404;
}

int sp_http_static_handler(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    const sp_http_static_t *st = arg;
    sp_http_method_t m = sp_http_request_method(req);
    if (m != SP_HTTP_GET && m != SP_HTTP_HEAD)
        return sp_http_response_error(res, 405, "Allow", "GET, HEAD");
    const char *path = sp_http_request_path(req);
    if (strncmp(path, st->strip, st->strip_len) || path[0] != '/')
        return sp_http_response_error(res, 404, NULL, NULL);
    const char *rel = path + st->strip_len;
    if (rel[0] != '/' && rel[0] != '\0') /* "/staticx" is not under "/static" */
        return sp_http_response_error(res, 404, NULL, NULL);
    if (climbs(rel))
        return sp_http_response_error(res, 403, NULL, NULL);
    struct stat sb;
    int fd = open_under_root(st, rel, &sb);
    const char *name = rel;
    if (fd >= 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        fd = open_index(st, res, rel, path, sp_http_request_query(req), &sb);
        if (fd == REDIRECTED)
            return 0;
        name = st->index;
    }
    if (fd == -500)
        return -ENOMEM;
    if (fd < 0)
        return sp_http_response_error(res, -fd, NULL, NULL);
    int rc = serve_file(st, req, res, fd, name, &sb);
    close(fd);
    return rc;
}
