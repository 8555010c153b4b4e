/* libspindle: the hooks are linked in; give them the bridge directly. */
#include "hook_bridge.h"
#include "spindle/hook.h"

extern const sp__hook_bridge_t sp__hook_bridge;

void sp__hook_connect(void)
{
    if (!sp_hook_attached())
        sp_hook_attach(&sp__hook_bridge);
}

bool sp_hook_available(void)
{
    return true;
}
