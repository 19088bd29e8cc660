/* error.h - the per-thread last-error message behind loom_last_error(). */
#ifndef LOOM_ERROR_H
#define LOOM_ERROR_H

#include "loom.h"

/* Records a message (printf-style) for loom_last_error() and returns code,
 * so a failure path reads `return loom_error(LOOM_ERR_IO, "...", ...);`. */
loom_status loom_error(loom_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with context ("loading x.gguf: ...") and
 * returns code. */
loom_status loom_error_wrap(loom_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void loom_error_clear(void);

/* How many messages this thread has recorded: a caller compares it before
 * and after a plugin call to tell whether the plugin gave a reason. */
unsigned long loom_error_serial(void);

#endif
