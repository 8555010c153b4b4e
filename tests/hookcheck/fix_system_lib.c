/* hookcheck fixture: a shared library importing system(), which the
 * program linking it does not import itself (found only with --deps). */
int fix_run(const char *command);

#include <stdlib.h>

int fix_run(const char *command)
{
    return system(command);
}
