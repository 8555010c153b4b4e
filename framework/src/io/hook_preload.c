/* libspindle_nohook: the hooks, if any, come from libspindle_preload.so
 * loaded with LD_PRELOAD; find it at run time and hand it the bridge. */
#include <dlfcn.h>
#include <stdatomic.h>

#include "hook_bridge.h"
#include "spindle/hook.h"

extern const sp__hook_bridge_t sp__hook_bridge;

static _Atomic bool found;

void sp__hook_connect(void)
{
    void (*attach)(const sp__hook_bridge_t *);
    *(void **)&attach = dlsym(RTLD_DEFAULT, "sp_hook_attach");
    if (attach) {
        attach(&sp__hook_bridge);
        atomic_store(&found, true);
    }
}

bool sp_hook_available(void)
{
    return atomic_load(&found);
}
