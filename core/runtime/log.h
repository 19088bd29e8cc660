/* log.h - messages from the core and plugins, routed to the host's sink. */
#ifndef LOOM_LOG_H
#define LOOM_LOG_H

#include "loom.h"

#include <stdarg.h>
#include <stdbool.h>

/* Sets the process-wide sink and level (the last runtime created wins;
 * NULL fn means standard error). */
void loom_log_configure(loom_log_level level, loom_log_fn fn, void *user);

/* Whether a message at this level reaches the sink: for messages that
 * cost work to gather. */
bool loom_log_enabled(loom_log_level level);
void loom_log(loom_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void loom_logv(loom_log_level level, const char *prefix, const char *fmt, va_list ap);

#define loom_warn(...) loom_log(LOOM_LOG_WARN, __VA_ARGS__)
#define loom_info(...) loom_log(LOOM_LOG_INFO, __VA_ARGS__)
#define loom_debug(...) loom_log(LOOM_LOG_DEBUG, __VA_ARGS__)

#endif
