/* fuzz_support.h - what the libFuzzer targets share: a plugin host, the
 * input written to a file for path-based readers, the shared test data and
 * a quiet runtime. */
#ifndef LOOM_FUZZ_SUPPORT_H
#define LOOM_FUZZ_SUPPORT_H

#include "loom.h"
#include "loom/plugin_api.h"

#include <stddef.h>
#include <stdint.h>

/* A loom_host that formats each message and keeps none: the targets look
 * for crashes and sanitizer reports, not for what rejected input is told. */
const loom_host *fuzz_host(void);

/* Writes size bytes of data to name in this process's scratch directory
 * (under /dev/shm, removed at exit) and returns the file's path, or the
 * directory's when name is NULL. Aborts if the write fails: a target that
 * cannot feed its input would report nothing. */
const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size);

/* "<shared data>/relative": $LOOM_TEST_DATA, else ../shared beside the
 * source tree. Aborts, saying which file, when it is absent. */
const char *fuzz_data_path(const char *relative);

/* A runtime on the build tree's plugins.yaml, one thread, messages
 * dropped. Aborts on failure. */
loom_runtime *fuzz_runtime(void);

#endif
