/* sp_version (version.h). */
#include "spindle/version.h"

#define SP_STR(x) #x
#define SP_XSTR(x) SP_STR(x)

const char *sp_version(void)
{
    return SP_XSTR(SP_VERSION_MAJOR) "." SP_XSTR(SP_VERSION_MINOR) "." SP_XSTR(
        SP_VERSION_PATCH);
}
