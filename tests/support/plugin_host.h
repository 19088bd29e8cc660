/* plugin_host.h - load plugins directly in tests, without the registry. */
#ifndef LOOM_TEST_PLUGIN_HOST_H
#define LOOM_TEST_PLUGIN_HOST_H

#include "loom/plugin_api.h"

/* A loom_host whose set_error stores into test_plugin_error() and whose log
 * prints to stderr. */
const loom_host *test_host(void);
/* The last message a plugin gave to set_error ("" after test_clear_error). */
const char *test_plugin_error(void);
void test_clear_error(void);

/* dlopens "<build>/plugins/<file>" (e.g. "loom-gguf.so") and returns its
 * descriptor; aborts the test (ck_abort) if that fails. The library stays
 * loaded until the process exits. */
const loom_plugin_desc *test_load_plugin(const char *file);

/* Opens a model file through the gguf plugin; NULL (with
 * test_plugin_error() set) on failure. */
loom_model_file *test_open_gguf(const char *path);
void test_close_gguf(loom_model_file *file);

/* The value under key in an open file, which must exist and have this
 * type (else the test fails). */
const loom_meta_value *test_meta_of(const loom_model_file *f, const char *key, loom_meta_type type);
/* The tensor called name, or NULL. */
const loom_file_tensor *test_find_file_tensor(const loom_model_file *f, const char *name);
/* The same, failing the test when there is none. */
const loom_file_tensor *test_file_tensor(const loom_model_file *f, const char *name);

#endif
