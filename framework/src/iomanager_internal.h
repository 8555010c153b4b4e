/* Internal: limits of the IOManager shared with the hook layer. */
#ifndef SP_IOMANAGER_INTERNAL_H
#define SP_IOMANAGER_INTERNAL_H

#include "spindle/iomanager.h"

#endif
