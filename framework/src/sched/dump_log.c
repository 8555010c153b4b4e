/* sp_fibers_dump_to_log (debug.h): the text dump through a logger.
 *
 * The dump is made into memory and cut where a group of fibers begins
 * (a blank line in the text layout): a record per group keeps each one
 * ordinary-sized for the log's bounded queue. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spindle/debug.h"

/* Log text[0..len) as records, one per blank-line-separated part. */
static void log_parts(sp_logger_t *lg, sp_log_level_t level, const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *cut = strstr(p, "\n\n");
        size_t n = cut ? (size_t)(cut - p) : (size_t)(end - p);
        if (!cut && n > 0 && p[n - 1] == '\n')
            n--; /* the pattern ends the record's line */
        if (n > 0)
            sp_log_write(lg, level, __FILE__, __LINE__, "%.*s", (int)n, p);
        p = cut ? cut + 2 : end;
    }
}

int sp_fibers_dump_to_log(sp_logger_t *lg, sp_log_level_t level)
{
    if (!lg)
        lg = sp_logger("spindle.fibers");
    if (!sp_log_enabled(lg, level))
        return 0;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return -errno;
    int rc = sp_fibers_dump(mem, 0);
    if (fclose(mem) != 0 && rc >= 0)
        rc = -ENOMEM;
    if (rc >= 0)
        log_parts(lg, level, text, len);
    free(text);
    return rc;
}
