/* log.c - messages from the core and plugins, routed to the host's sink. */
#include "runtime/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static struct {
	pthread_mutex_t lock;
	loom_log_level level;
	loom_log_fn fn;
	void *user;
} sink = {PTHREAD_MUTEX_INITIALIZER, LOOM_LOG_WARN, NULL, NULL};

void loom_log_configure(loom_log_level level, loom_log_fn fn, void *user)
{
	pthread_mutex_lock(&sink.lock);
	sink.level = level;
	sink.fn = fn;
	sink.user = user;
	pthread_mutex_unlock(&sink.lock);
}

bool loom_log_enabled(loom_log_level level)
{
	pthread_mutex_lock(&sink.lock);
	bool on = level <= sink.level;
	pthread_mutex_unlock(&sink.lock);
	return on;
}

void loom_logv(loom_log_level level, const char *prefix, const char *fmt, va_list ap)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	char msg[2048];
	int n = 0;

	pthread_mutex_lock(&sink.lock);
	if (level > sink.level) {
		pthread_mutex_unlock(&sink.lock);
		return;
	}
	if (prefix != NULL)
		n = snprintf(msg, sizeof(msg), "%s: ", prefix);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	if (sink.fn != NULL)
		sink.fn(sink.user, level, msg);
	else
		fprintf(stderr, "loom %s: %s\n", names[level], msg);
	pthread_mutex_unlock(&sink.lock);
}

void loom_log(loom_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	loom_logv(level, NULL, fmt, ap);
	va_end(ap);
}
