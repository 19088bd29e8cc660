/* st_json.h - the JSON text of a checkpoint (file headers, config.json, the
 * shard index), parsed with errors that say where. */
#ifndef LOOM_ST_JSON_H
#define LOOM_ST_JSON_H

#include "loom/plugin_api.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Larger JSON is refused before it is parsed: a safetensors header or a
 * config.json of real models is a few megabytes at most. */
#define ST_JSON_MAX ((uint64_t)100 << 20)

/* JSON numbers are doubles: integers beyond 2^53 are not exact. */
#define ST_MAX_EXACT ((uint64_t)1 << 53)

/* Whether item is a JSON number that is a whole number below limit; if so
 * it goes to *out. */
bool st_json_uint(const cJSON *item, uint64_t limit, uint64_t *out);

/* A name taken from a file, quoted and cut to 80 bytes for messages (a
 * hostile header may hold megabyte names). */
#define ST_NAME_FMT "'%.80s'"

/* Parses len bytes of text (not NUL-terminated) as one JSON value followed
 * by nothing but whitespace. On failure: NULL after host->set_error
 * "<path>: JSON syntax error at byte <n> of <what>". */
cJSON *st_json_parse(const loom_host *host, const char *path, const char *what,
		     const char *text, size_t len);

/* The whole regular file at path, NUL-terminated after its *len bytes, in
 * a malloc'd buffer. A file over max bytes is refused with "... MiB limit
 * for <what>". NULL after host->set_error naming the file; but if missing
 * is not NULL, *missing says whether there is no such file, and then there
 * is no error set. */
char *st_read_file(const loom_host *host, const char *path, size_t max, const char *what,
		   size_t *len, bool *missing);

/* Reads the file at path (at most ST_JSON_MAX bytes) and parses it; NULL
 * after host->set_error naming the file, or (missing as st_read_file's)
 * with *missing set. */
cJSON *st_json_load(const loom_host *host, const char *path, bool *missing);

#endif
