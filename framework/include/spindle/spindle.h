/* Every public header of spindle, for programs that would rather include
 * one. Each header below states its own contract; docs/reference/ has a
 * page per header. */
#ifndef SPINDLE_SPINDLE_H
#define SPINDLE_SPINDLE_H

#include "spindle/version.h"
#include "spindle/error.h"
#include "spindle/fiber.h"
#include "spindle/config.h"
#include "spindle/log.h"
#include "spindle/metrics.h"
#include "spindle/scheduler.h"
#include "spindle/task.h"
#include "spindle/iomanager.h"
#include "spindle/timer.h"
#include "spindle/hook.h"
#include "spindle/net.h"
#include "spindle/buffer.h"
#include "spindle/tcp_server.h"
#include "spindle/tls.h"
#include "spindle/sync.h"
#include "spindle/group.h"
#include "spindle/http.h"
#include "spindle/websocket.h"
#include "spindle/daemon.h"
#include "spindle/debug.h"

#endif
