/* picky.c - a backend that holds memory like a real one but refuses one op
 * (plugins.yaml options: `refuse: OP`, and with `refuse_type: TYPE` only
 * where one of the node's tensors has that type). Models load onto it; a
 * context whose steps need the refused op must be refused when it is made.
 * Its device reports `free_kib: N` KiB free, for the core's check that a
 * model and its context fit. With `work_kib: N` each token of a step needs
 * N KiB of work memory beyond that, which its reserve slot refuses: a
 * context whose largest step needs more than its device has must be
 * refused when it is made. It computes nothing. */
#include "fake_backend.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[LOOM_OP_COUNT] = {
	[LOOM_OP_GET_ROWS] = "GET_ROWS", [LOOM_OP_RMS_NORM] = "RMS_NORM", [LOOM_OP_MATMUL] = "MATMUL",
	[LOOM_OP_ADD] = "ADD",		 [LOOM_OP_MUL] = "MUL",		  [LOOM_OP_ROPE] = "ROPE",
	[LOOM_OP_KV_STORE] = "KV_STORE", [LOOM_OP_ATTENTION] = "ATTENTION", [LOOM_OP_SWIGLU] = "SWIGLU",
	[LOOM_OP_SCALE] = "SCALE",	 [LOOM_OP_CONVERT] = "CONVERT",	  [LOOM_OP_LAYER_NORM] = "LAYER_NORM",
	[LOOM_OP_GELU] = "GELU",	 [LOOM_OP_SOFTCAP] = "SOFTCAP",
};

typedef struct picky {
	int op;   /* refused op; LOOM_OP_NONE: none */
	int type; /* -1: any type */
	uint64_t free_bytes; /* what its device reports free */
	uint64_t work_bytes; /* work memory a step needs per token */
	const loom_host *host;
} picky;

static void *picky_init(const loom_host *host, const loom_backend_options *opts)
{
	picky *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		host->set_error("out of memory");
		return NULL;
	}
	p->type = -1;
	p->host = host;
	p->free_bytes = (uint64_t)1 << 40;
	for (int i = 0; i < opts->n_options; i++) {
		const char *key = opts->option_keys[i], *value = opts->option_values[i];
		for (int op = 0; strcmp(key, "refuse") == 0 && op < LOOM_OP_COUNT; op++)
			if (op_names[op] != NULL && strcmp(op_names[op], value) == 0)
				p->op = op;
		for (int t = 0; strcmp(key, "refuse_type") == 0 && t < LOOM_DTYPE_COUNT; t++)
			if (loom_dtype_traits_of(t).name != NULL && strcmp(loom_dtype_traits_of(t).name, value) == 0)
				p->type = t;
		if (strcmp(key, "free_kib") == 0)
			p->free_bytes = strtoull(value, NULL, 10) << 10;
		if (strcmp(key, "work_kib") == 0)
			p->work_bytes = strtoull(value, NULL, 10) << 10;
	}
	return p;
}

static void picky_free(void *backend)
{
	free(backend);
}

static loom_status picky_alloc(void *backend, size_t size, loom_buffer *out)
{
	(void)backend;
	out->base = calloc(1, size ? size : 1);
	out->handle = out->base;
	out->size = size;
	return out->base != NULL ? LOOM_OK : LOOM_ERR_NO_MEMORY;
}

static void picky_buffer_free(void *backend, loom_buffer *buf)
{
	(void)backend;
	free(buf->handle);
}

static loom_status picky_upload(void *backend, loom_buffer *buf, size_t offset, const void *src, size_t size)
{
	(void)backend;
	memcpy((char *)buf->base + offset, src, size);
	return LOOM_OK;
}

static loom_status picky_download(void *backend, const loom_buffer *buf, size_t offset, void *dst, size_t size)
{
	(void)backend;
	memcpy(dst, (const char *)buf->base + offset, size);
	return LOOM_OK;
}

/* A device with free_kib free of twice that. */
static loom_status picky_device_info(void *backend, loom_device_info *out)
{
	const picky *p = backend;
	snprintf(out->name, sizeof(out->name), "picky device");
	out->memory_free = p->free_bytes;
	out->memory_total = 2 * p->free_bytes;
	return LOOM_OK;
}

static bool has_type(const loom_node *node, int type)
{
	if (type < 0 || (int)node->dst->dtype == type)
		return true;
	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++)
		if (node->src[i] != NULL && (int)node->src[i]->dtype == type)
			return true;
	return false;
}

static bool picky_supports(void *backend, const loom_node *node)
{
	const picky *p = backend;
	return !((int)node->op == p->op && has_type(node, p->type));
}

static loom_status picky_compute(void *backend, const loom_graph *graph)
{
	(void)backend;
	(void)graph;
	return LOOM_ERR_UNSUPPORTED;
}

/* A step's tokens: the most rows any node's result has. */
static int64_t step_tokens(const loom_graph *graph)
{
	int64_t tokens = 0;
	for (int i = 0; i < graph->n_nodes; i++)
		if (graph->nodes[i].op == LOOM_OP_MATMUL && graph->nodes[i].dst->ne[1] > tokens)
			tokens = graph->nodes[i].dst->ne[1];
	return tokens;
}

static loom_status picky_reserve(void *backend, const loom_graph *graph)
{
	const picky *p = backend;
	const int64_t tokens = step_tokens(graph);
	if ((uint64_t)tokens * p->work_bytes > p->free_bytes) {
		p->host->set_error("picky: no room for the work memory of a %" PRId64 "-token step", tokens);
		return LOOM_ERR_NO_MEMORY;
	}
	return LOOM_OK;
}

static const loom_backend_vtable vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = picky_init,
	.free = picky_free,
	.buffer_alloc = picky_alloc,
	.buffer_free = picky_buffer_free,
	.buffer_upload = picky_upload,
	.buffer_download = picky_download,
	.supports = picky_supports,
	.compute = picky_compute,
	.device_info = picky_device_info,
	.reserve = picky_reserve,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "picky",
	.version = "0.0.1",
	.description = "test fake: memory like a real backend, one op refused",
	.probe = fake_probe_ok,
	.vtable = &vtable,
};

FAKE_PLUGIN_ENTRY(desc)
