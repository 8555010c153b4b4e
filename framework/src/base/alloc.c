#include "alloc.h"

_Atomic long sp__alloc_budget = -1;

void sp__alloc_fail_after(long n)
{
    atomic_store(&sp__alloc_budget, n < 0 ? -1 : n);
}
