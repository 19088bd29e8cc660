/* host.c - the table of core services handed to plugins. */
#include "runtime/host.h"

#include "runtime/error.h"
#include "runtime/log.h"

#include <stdarg.h>
#include <stdio.h>

static void host_log(loom_log_level level, const char *plugin, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	loom_logv(level, plugin, fmt, ap);
	va_end(ap);
}

static void host_set_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	loom_error(LOOM_ERR_PLUGIN, "%s", msg);
}

static const loom_host host = {
	.struct_size = sizeof(loom_host),
	.log = host_log,
	.set_error = host_set_error,
};

const loom_host *loom_host_table(void)
{
	return &host;
}
