/* plugin_host.c - load plugins directly in tests, without the registry. */
#include "plugin_host.h"

#include "model/meta.h"

#include <check.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>

static char plugin_error[2048];

static void host_log(loom_log_level level, const char *plugin, const char *fmt, ...)
{
	va_list ap;
	if (level > LOOM_LOG_WARN)
		return;
	fprintf(stderr, "[%s] ", plugin);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void host_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(plugin_error, sizeof(plugin_error), fmt, ap);
	va_end(ap);
}

static const loom_host host = {
	.struct_size = sizeof(loom_host),
	.log = host_log,
	.set_error = host_set_error,
};

const loom_host *test_host(void)
{
	return &host;
}

const char *test_plugin_error(void)
{
	return plugin_error;
}

void test_clear_error(void)
{
	plugin_error[0] = '\0';
}

const loom_plugin_desc *test_load_plugin(const char *file)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", LOOM_TEST_PLUGIN_DIR, file);
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(lib != NULL, "dlopen %s: %s", path, dlerror());
	loom_plugin_entry_fn entry = (loom_plugin_entry_fn)dlsym(lib, LOOM_PLUGIN_ENTRY_SYMBOL);
	ck_assert_msg(entry != NULL, "%s has no %s", path, LOOM_PLUGIN_ENTRY_SYMBOL);
	const loom_plugin_desc *desc = entry();
	ck_assert_msg(desc != NULL && desc->abi_version == LOOM_PLUGIN_ABI_VERSION,
		      "%s: bad descriptor", path);
	return desc;
}

static const loom_format_vtable *gguf_vtable(void)
{
	static const loom_format_vtable *vt;
	if (vt == NULL)
		vt = test_load_plugin("loom-gguf.so")->vtable;
	return vt;
}

loom_model_file *test_open_gguf(const char *path)
{
	test_clear_error();
	return gguf_vtable()->open(&host, path);
}

void test_close_gguf(loom_model_file *file)
{
	if (file != NULL)
		gguf_vtable()->close(file);
}

const loom_meta_value *test_meta_of(const loom_model_file *f, const char *key, loom_meta_type type)
{
	const loom_meta_value *v = loom_meta_find(f, key);

	ck_assert_msg(v != NULL, "key %s is missing", key);
	ck_assert_msg(v->type == type, "key %s has type %d, expected %d", key, v->type, type);
	return v;
}

const loom_file_tensor *test_find_file_tensor(const loom_model_file *f, const char *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (loom_string_eq(f->tensors[i].name, name))
			return &f->tensors[i];
	return NULL;
}

const loom_file_tensor *test_file_tensor(const loom_model_file *f, const char *name)
{
	const loom_file_tensor *t = test_find_file_tensor(f, name);
	ck_assert_msg(t != NULL, "tensor %s is missing", name);
	return t;
}
