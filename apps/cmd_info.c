/* cmd_info.c - `loom info FILE` (metadata and tensors) and `loom info
 * --plugins` (what the registry found and chose). */
#include "cli.h"

#include <stdlib.h>

static int list_plugins(const cli_options *o)
{
	loom_runtime *rt = NULL;
	if (!cli_open_runtime(o, &rt))
		return 1;
	printf("plugins.yaml policy chose backend: %s\n", loom_runtime_backend_name(rt));
	loom_device_info dev;
	if (loom_runtime_device(rt, &dev) == LOOM_OK)
		printf("device: %s, %.0f MiB free of %.0f MiB\n", dev.name, (double)dev.memory_free / (1 << 20),
		       (double)dev.memory_total / (1 << 20));
	printf("\n");
	printf("%-14s %-8s %-6s %-7s %-10s %s\n", "name", "kind", "score", "chosen", "version", "path / reason");
	for (size_t i = 0; i < loom_runtime_plugin_count(rt); i++) {
		loom_plugin_info pi;
		if (loom_runtime_plugin_info(rt, i, &pi) != LOOM_OK)
			continue;
		char score[16];
		if (pi.kind == LOOM_PLUGIN_FORMAT && pi.loaded)
			snprintf(score, sizeof(score), "%s", "-");
		else
			snprintf(score, sizeof(score), "%d", pi.score);
		printf("%-14s %-8s %-6s %-7s %-10s %s\n", pi.name, pi.kind == LOOM_PLUGIN_BACKEND ? "backend" : "format",
		       score, pi.chosen ? "yes" : "no", pi.version ? pi.version : "-", pi.path);
		if (pi.why != NULL && pi.why[0] != '\0')
			printf("%-14s %-8s %-6s %-7s %-10s   %s\n", "", "", "", "", "", pi.why);
	}
	loom_runtime_free(rt);
	return cli_stdout_ok() ? 0 : 1;
}

static int describe_file(const cli_options *o)
{
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	if (!cli_open_runtime(o, &rt))
		return 1;
	loom_model_params mp = loom_model_default_params();
	mp.metadata_only = true;
	loom_status st = loom_model_load(rt, o->model, &mp, &model);
	if (st != LOOM_OK) {
		loom_runtime_free(rt);
		return cli_fail_status(st, "cannot open");
	}
	printf("file: %s\nformat: %s\n\nmetadata (%zu keys):\n", o->model, loom_model_format(model),
	       loom_model_meta_count(model));
	char value[1024];
	for (size_t i = 0; i < loom_model_meta_count(model); i++) {
		const char *key = loom_model_meta_key(model, i);
		printf("  %-44s ", key);
		loom_model_meta_value_str(model, i, value, sizeof(value));
		printf("%s\n", value);
	}
	size_t n = loom_model_tensor_count(model);
	printf("\ntensors (%zu, %.2f MiB, %.2f M parameters):\n", n, loom_model_size(model) / 1048576.0,
	       loom_model_n_params(model) / 1e6);
	printf("  %-40s %-6s %-24s %12s %12s\n", "name", "type", "shape", "bytes", "offset");
	for (size_t i = 0; i < n; i++) {
		loom_tensor_info ti;
		if (loom_model_tensor_info(model, i, &ti) != LOOM_OK)
			continue;
		char shape[64];
		int len = snprintf(shape, sizeof(shape), "[");
		for (int d = 0; d < ti.n_dims; d++)
			len += snprintf(shape + len, sizeof(shape) - (size_t)len, d ? ", %lld" : "%lld", (long long)ti.ne[d]);
		snprintf(shape + len, sizeof(shape) - (size_t)len, "]");
		const char *type = loom_dtype_name(ti.dtype);
		printf("  %-40s %-6s %-24s %12llu %12llu\n", ti.name, type ? type : "?", shape,
		       (unsigned long long)ti.n_bytes, (unsigned long long)ti.file_offset);
	}
	loom_model_free(model);
	/* The block, where a contract describes the file's architecture. */
	char block[4096];
	size_t block_len;
	if (loom_model_describe_file(rt, o->model, block, sizeof(block), &block_len) == LOOM_OK)
		printf("\n%s", block);
	else
		printf("\nblock: not described (%s)\n", loom_last_error());
	loom_runtime_free(rt);
	return cli_stdout_ok() ? 0 : 1;
}

int cmd_info(int argc, char **argv)
{
	cli_options o;
	if (!cli_parse("info", argc, argv, CLI_MODEL | CLI_BACKEND | CLI_PLUGINS_LIST | CLI_ARGS(1), &o))
		return 1;
	if (o.list_plugins)
		return list_plugins(&o);
	if (o.model != NULL && o.n_positional == 1)
		return cli_fail("info: the model is given twice (-m %s and %s)", o.model, o.positional[0]);
	if (o.model == NULL && o.n_positional == 1)
		o.model = o.positional[0];
	if (o.model == NULL || o.n_positional > 1)
		return cli_fail("info: give one model file (loom info FILE) or --plugins");
	return describe_file(&o);
}
