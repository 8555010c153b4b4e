/* sp_strerror (error.h). strerrordesc_np, unlike strerror, returns a
 * constant string and is safe from any thread (glibc 2.32). */
#include <string.h>

#include "spindle/error.h"

const char *sp_strerror(int rc)
{
    if (rc >= 0)
        return "Success";
    const char *s = strerrordesc_np(-rc);
    return s ? s : "Unknown error";
}
