/* HTTP dates (RFC 7231 7.1.1.1) and the cached Date header.
 *
 * Every response carries the current time as an IMF-fixdate. Formatting it
 * per response would cost a gmtime and a strftime; instead each worker
 * thread keeps the last string and rebuilds it when the second changes, so
 * it is rebuilt at most once a second per thread, with no lock and no timer
 * waking an idle process. The cache is only touched between two parks, so
 * a fiber that moves to another thread simply uses that thread's copy. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "http_internal.h"

static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void sp__http_date_format(time_t t, char out[SP__HTTP_DATE_LEN + 1])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    /* Room for any int the compiler cannot rule out; the real text is
     * always SP__HTTP_DATE_LEN characters. */
    char text[96];
    snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT",
             days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12],
             (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min, tm.tm_sec);
    memcpy(out, text, SP__HTTP_DATE_LEN);
    out[SP__HTTP_DATE_LEN] = '\0';
}

static _Thread_local struct {
    time_t sec;
    char line[SP__HTTP_DATE_LINE_LEN + 1];
} cache;

const char *sp__http_date_line(void)
{
    time_t now = time(NULL);
    if (now != cache.sec || !cache.line[0]) {
        memcpy(cache.line, "Date: ", 6);
        sp__http_date_format(now, cache.line + 6);
        memcpy(cache.line + 6 + SP__HTTP_DATE_LEN, "\r\n", 2);
        cache.sec = now;
    }
    return cache.line;
}

_Thread_local sp__http_ok_t sp__http_ok;

void sp__http_ok_build(const char *server_line, size_t server_len, unsigned server,
                       time_t now)
{
    sp__http_ok_t *ok = &sp__http_ok;
    size_t n = sizeof SP__HTTP_OK_LINE - 1;
    memcpy(ok->text, SP__HTTP_OK_LINE, n);
    memcpy(ok->text + n, server_line, server_len);
    n += server_len;
    memcpy(ok->text + n, sp__http_date_line(), SP__HTTP_DATE_LINE_LEN);
    ok->len = n + SP__HTTP_DATE_LINE_LEN;
    ok->sec = now;
    ok->server = server;
}

static int month_of(const char *m)
{
    for (int i = 0; i < 12; i++)
        if (!strncmp(m, months[i], 3))
            return i;
    return -1;
}

/* Fill tm from the three accepted layouts: "Sun, 06 Nov 1994 08:49:37 GMT",
 * "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994". */
static bool scan(const char *s, struct tm *tm)
{
    char mon[4] = {0};
    int n = 0;
    if (sscanf(s, "%*3s, %2d %3s %4d %2d:%2d:%2d GMT%n", &tm->tm_mday, mon,
               &tm->tm_year, &tm->tm_hour, &tm->tm_min, &tm->tm_sec, &n) == 6 && n) {
        tm->tm_year -= 1900;
    } else if (sscanf(s, "%*[A-Za-z], %2d-%3s-%2d %2d:%2d:%2d GMT%n", &tm->tm_mday, mon,
                      &tm->tm_year, &tm->tm_hour, &tm->tm_min, &tm->tm_sec, &n) == 6 && n) {
        if (tm->tm_year < 70) /* two-digit years: RFC 7231 7.1.1.1 */
            tm->tm_year += 100;
    } else if (sscanf(s, "%*3s %3s %2d %2d:%2d:%2d %4d%n", mon, &tm->tm_mday,
                      &tm->tm_hour, &tm->tm_min, &tm->tm_sec, &tm->tm_year, &n) == 6 && n) {
        tm->tm_year -= 1900;
    } else {
        return false;
    }
    tm->tm_mon = month_of(mon);
    return tm->tm_mon >= 0 && tm->tm_mday >= 1 && tm->tm_mday <= 31 &&
           tm->tm_hour <= 23 && tm->tm_min <= 59 && tm->tm_sec <= 60;
}

time_t sp__http_date_parse(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!s || !scan(s, &tm))
        return (time_t)-1;
    return timegm(&tm);
}
