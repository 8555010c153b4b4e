/* The access log: one line per answered request (opts.access_log). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

static bool log_escaped(unsigned char ch)
{
    return ch < ' ' || ch >= 0x7f || ch == '"' || ch == '\\';
}

/* The target as the log line shows it: a '"', '\\' or byte outside
 * printable ASCII as \xHH (nginx's escaping), so a client cannot forge the
 * line's fields. s itself when nothing needs it; else *copy, freed by the
 * caller (NULL, and "-" shown, when out of memory). */
static const char *log_safe(const char *s, char **copy)
{
    *copy = NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && !log_escaped(*p))
        p++;
    if (!*p)
        return s;
    char *o = *copy = malloc(4 * strlen(s) + 1);
    if (!o)
        return "-";
    for (p = (const unsigned char *)s; *p; p++)
        o += log_escaped(*p) ? sprintf(o, "\\x%02X", *p) : sprintf(o, "%c", *p);
    return *copy;
}

void sp__http_log_access(sp_http_server_t *srv, const sp_http_request_t *req, int status,
                         uint64_t sent, uint64_t start_ns)
{
    char peer[SP_ADDR_TEXT_MAX] = "-";
    sp_addr_format(req->peer, peer, sizeof peer);
    /* An error in the headers still shows the request line. */
    bool parsed = req->target_done;
    uint64_t us = (sp__now_ns() - start_ns) / 1000;
    char *copy;
    const char *target = parsed ? log_safe(sp_http_request_target(req), &copy) : "-";
    SP_LOG_INFO(srv->access, "%s \"%s %s\" %d %llu %lluus", peer,
                parsed ? sp_http_request_method_name(req) : "-", target, status,
                (unsigned long long)sent, (unsigned long long)us);
    if (parsed)
        free(copy);
}
