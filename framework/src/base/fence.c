/* Asymmetric fences on membarrier(2) (fence.h). */
#include "fence.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

atomic_bool sp__fence_asym_on;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
    const char *env = getenv("SPINDLE_MEMBARRIER");
    if (env && !strcmp(env, "0"))
        return;
    /* The expedited command needs the process registered first; both
     * exist since Linux 4.14. */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
        atomic_store(&sp__fence_asym_on, true);
}

void sp__fence_asym_init(void)
{
    pthread_once(&once, init_once);
}

void sp__fence_heavy(void)
{
    /* Cannot fail once registered; abort rather than lose an ordering. */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        abort();
}
