/* plugin_bench.c - see plugin_bench.h. */
#include "plugin_bench.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void host_log(loom_log_level level, const char *plugin, const char *fmt, ...)
{
	va_list ap;

	(void)level;
	fprintf(stderr, "%s: ", plugin);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void host_set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const loom_host host = {
	.struct_size = sizeof(loom_host),
	.log = host_log,
	.set_error = host_set_error,
};

int bench_open_backend(const char *path, int n_threads, bench_backend *out)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (lib == NULL) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	loom_plugin_entry_fn entry = (loom_plugin_entry_fn)dlsym(lib, LOOM_PLUGIN_ENTRY_SYMBOL);
	const loom_plugin_desc *desc = entry ? entry() : NULL;
	if (desc == NULL || desc->abi_version != LOOM_PLUGIN_ABI_VERSION || desc->kind != LOOM_PLUGIN_BACKEND) {
		fprintf(stderr, "%s is not a backend plugin of this ABI\n", path);
		return 1;
	}
	loom_backend_options opts = {.struct_size = sizeof(opts), .n_threads = n_threads};
	out->vt = desc->vtable;
	out->be = out->vt->init(&host, &opts);
	return out->be == NULL;
}

void bench_tensor(loom_tensor *t, loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2, void *data)
{
	memset(t, 0, sizeof(*t));
	t->dtype = type;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = ne2;
	t->ne[3] = 1;
	t->nb[0] = loom_dtype_traits_of(type).block_bytes;
	t->nb[1] = loom_dtype_row_bytes(type, ne0);
	t->nb[2] = t->nb[1] * (size_t)ne1;
	t->nb[3] = t->nb[2] * (size_t)ne2;
	t->data = data;
}

loom_dtype bench_dtype_named(const char *name)
{
	for (int t = 0; t < LOOM_DTYPE_COUNT; t++)
		if (loom_dtype_traits_of(t).name != NULL && strcmp(loom_dtype_traits_of(t).name, name) == 0)
			return (loom_dtype)t;
	return LOOM_DTYPE_COUNT;
}

float bench_rand_normal(unsigned *s)
{
	double u1 = (rand_r(s) + 1.0) / ((double)RAND_MAX + 2.0), u2 = rand_r(s) / (double)RAND_MAX;
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_sort_times(double *times, int n)
{
	qsort(times, (size_t)n, sizeof(double), cmp_double);
	return times[n / 2];
}
