/*
 * test_cuda.c - the CUDA backend plugin (loom-cuda.so).
 *
 * probe: everywhere. The plugin loads without a driver, its probe says why
 *   it cannot run (or that it can), and `loom info --plugins` shows the
 *   same and chooses a CPU backend (or cuda).
 * device: the device query, new buffers zeroed, a download ordered after
 *   a compute, out-of-range indices refused. Every op x dtype runs in
 *   test_backend_ops.c, the suite every backend shares.
 * model: every model with golden data, forced onto cuda: golden_check's
 *   tokens, logits and greedy continuation, and `loom perplexity`.
 * kv: the cache over many steps, removal, two sequences and a full
 *   context, each step's logits against cpu-generic's.
 * families: everywhere, every node of each family's steps is one cuda
 *   takes; on a GPU, every family model test_families checks
 *   (mixture-of-experts, MXFP4, windows, caps, sinks...) on cuda against
 *   the same reference files and bands; the models are written by the
 *   test, so the GPU machine needs no data for them.
 * Without the plugin or without a device each tcase prints one SKIP line.
 */
#include "check_main.h"
#include "cpu_ref.h"
#include "family_check.h"
#include "family_fixture.h"
#include "fixture.h"
#include "golden_check.h"
#include "op_case.h"
#include "plugin_host.h"
#include "run_cmd.h"
#include "step_nodes.h"
#include "testdata.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* The plugin and the device                                                */

static const loom_plugin_desc *cuda_desc;
static int cuda_score;
static char cuda_why[256];

/* Loads and probes loom-cuda.so (once per test process: Check forks per
 * test, and CUDA must not start before a fork); false if it was not built. */
static bool cuda_probed(void)
{
	loom_probe_args args = {.struct_size = sizeof(args), .host = test_host()};

	if (cuda_desc != NULL)
		return true;
	if (access(LOOM_TEST_PLUGIN_DIR "/loom-cuda.so", F_OK) != 0)
		return false;
	cuda_desc = test_load_plugin("loom-cuda.so");
	cuda_score = cuda_desc->probe(&args, cuda_why, sizeof(cuda_why));
	return true;
}

/* Whether the GPU tcases can run; if not, and say, one SKIP line why. */
static bool gpu_present(bool say)
{
	if (!cuda_probed()) {
		if (say)
			printf("SKIP: loom-cuda.so not built (no CUDA toolkit)\n");
		return false;
	}
	if (cuda_score <= 0) {
		if (say)
			printf("SKIP: no CUDA device: %s\n", cuda_why);
		return false;
	}
	return true;
}

/* The shared data, checked without the SKIP line test_data_dir prints, so
 * that a loop test prints it once. */
static bool shared_data(bool say)
{
	const char *env = getenv("LOOM_TEST_DATA");
	char probe[4200];
	struct stat st;

	if (say)
		return test_data_dir() != NULL;
	snprintf(probe, sizeof(probe), "%s/golden", env != NULL && env[0] != '\0' ? env : LOOM_TEST_DEFAULT_DATA);
	return stat(probe, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether the data holds file (under models/) and, if not NULL, golden
 * (under golden/): the GPU machine carries only some of them; a case
 * without its files is skipped with a line saying so. */
static bool carried(const char *file, const char *golden)
{
	char rel[512], path[4200];
	struct stat st;

	snprintf(rel, sizeof(rel), "models/%s", file);
	if (!test_data_path(path, sizeof(path), rel) || stat(path, &st) != 0) {
		printf("SKIP: %s not in the test data\n", rel);
		return false;
	}
	snprintf(rel, sizeof(rel), "golden/%s", golden != NULL ? golden : "");
	if (golden != NULL && (!test_data_path(path, sizeof(path), rel) || stat(path, &st) != 0)) {
		printf("SKIP: %s not in the test data\n", rel);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* probe                                                                    */

/* The reasons cuda_probe.c gives for a score of 0. */
static bool documented_reason(const char *why)
{
	static const char *const fixed[] = {
		"no CUDA driver (libcuda.so.1 not found)",
		"no CUDA device",
		"libcuda.so.1 lacks the driver API (cuInit, cuDeviceGetCount)",
	};
	static const char too_old[] = " runtime loom-cuda was built with";
	static const char failed[] = "the CUDA driver failed to start (cuInit error ";

	for (size_t i = 0; i < N_OF(fixed); i++)
		if (strcmp(why, fixed[i]) == 0)
			return true;
	if (strncmp(why, "CUDA driver ", 12) == 0 && strstr(why, too_old) != NULL)
		return true;
	return strncmp(why, failed, strlen(failed)) == 0;
}

/* The line of text that starts with prefix, or NULL. */
static const char *line_starting(const char *text, const char *prefix)
{
	const char *p = text;

	while (p != NULL && strncmp(p, prefix, strlen(prefix)) != 0) {
		p = strchr(p, '\n');
		p = p != NULL ? p + 1 : NULL;
	}
	return p;
}

START_TEST(probe_plugin)
{
	if (!cuda_probed()) {
		printf("SKIP: loom-cuda.so not built (no CUDA toolkit)\n");
		return;
	}
	const loom_backend_vtable *vt = cuda_desc->vtable;
	loom_probe_args args = {.struct_size = sizeof(args), .host = test_host()};

	ck_assert_int_eq(cuda_desc->kind, LOOM_PLUGIN_BACKEND);
	ck_assert_str_eq(cuda_desc->name, "cuda");
	ck_assert_ptr_nonnull(cuda_desc->version);
	ck_assert_uint_ge(vt->struct_size, sizeof(loom_backend_vtable));
	ck_assert_msg(LOOM_VT_HAS(vt, device_info), "the cuda vtable lacks device_info");
	ck_assert_msg(cuda_score >= 0, "probe score %d", cuda_score);
	if (cuda_score == 0) {
		ck_assert_msg(cuda_why[0] != '\0' && strchr(cuda_why, '\n') == NULL && documented_reason(cuda_why),
			      "probe refuses with an undocumented reason '%s'", cuda_why);
		printf("cuda refuses this machine: %s\n", cuda_why);
	}
	/* A probe may be asked without room for a reason. */
	ck_assert_int_eq(cuda_desc->probe(&args, NULL, 0), cuda_score);

	/* The installed plugins.yaml offers cuda too. */
	char *yaml = test_read_file(LOOM_TEST_SOURCE_DIR "/plugins.yaml", NULL);
	ck_assert_msg(yaml != NULL && strstr(yaml, "name: cuda") != NULL && strstr(yaml, "file: loom-cuda.so") != NULL,
		      "plugins.yaml does not list the cuda backend");
	free(yaml);

	/* `loom info --plugins` under backend: auto (LOOM_BACKEND would force one). */
	cmd_result r = run_cmd("unset LOOM_BACKEND; $LOOM info --plugins --plugins %s", test_plugins_file());
	ck_assert_msg(r.status == 0, "loom info --plugins: exit %d: %s", r.status, r.err);
	const char *line = line_starting(r.out, "cuda ");
	const char *chose = strstr(r.out, "chose backend: ");
	char name[32], kind[16], score[16], chosen[16], backend[64], want[300];
	ck_assert_msg(line != NULL && sscanf(line, "%31s %15s %15s %15s", name, kind, score, chosen) == 4,
		      "no cuda line in:\n%s", r.out);
	ck_assert_msg(chose != NULL && sscanf(chose + 15, "%63s", backend) == 1, "no chosen backend in:\n%s", r.out);
	ck_assert_str_eq(kind, "backend");
	if (cuda_score == 0) {
		const char *next = strchr(line, '\n');
		ck_assert_msg(next != NULL, "no reason under the cuda line:\n%s", r.out);
		next += strspn(next, "\n ");
		snprintf(want, sizeof(want), "unusable on this machine: %s\n", cuda_why);
		ck_assert_msg(strcmp(score, "0") == 0 && strcmp(chosen, "no") == 0 &&
				      strncmp(next, want, strlen(want)) == 0,
			      "cuda line does not say score 0, not chosen, '%s':\n%s", cuda_why, r.out);
		ck_assert_msg(strncmp(backend, "cpu-", 4) == 0 && line_starting(r.out, "device: ") == NULL,
			      "without a GPU the policy chose %s:\n%s", backend, r.out);
	} else {
		char want_score[16];
		snprintf(want_score, sizeof(want_score), "%d", cuda_score);
		ck_assert_msg(strcmp(score, want_score) == 0 && strcmp(chosen, "yes") == 0 &&
				      strcmp(backend, "cuda") == 0 && line_starting(r.out, "device: ") != NULL,
			      "with a GPU (score %d) the policy should choose cuda and name the device:\n%s",
			      cuda_score, r.out);
	}
	cmd_result_free(&r);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* ops: backends, host tensors, cases                                       */

/* ------------------------------------------------------------------------ */
/* device: what the GPU adds to a backend (the ops are test_backend_ops.c's) */

typedef struct backend {
	const char *name;
	const loom_backend_vtable *vt;
	void *be;
} backend;

static backend gpu;

static void open_gpu(void)
{
	loom_backend_options o = {.struct_size = sizeof(o), .n_threads = 0, .device = 0};

	gpu = (backend){.name = "cuda", .vt = cuda_desc->vtable};
	gpu.be = gpu.vt->init(test_host(), &o);
	ck_assert_msg(gpu.be != NULL, "cuda: init: %s", test_plugin_error());
}

static void compare_exact(const char *what, const void *want, const void *got, size_t bytes)
{
	const unsigned char *w = want, *g = got;
	size_t i = 0;

	while (i < bytes && g[i] == w[i])
		i++;
	ck_assert_msg(i == bytes, "%s on cuda: byte %zu of %zu is %#x, expected %#x", what, i, bytes,
		      i < bytes ? g[i] : 0, i < bytes ? w[i] : 0);
}

/* The device query; new buffers zeroed; a download ordered after the
 * compute before it; an index outside a table or cache failing the
 * compute, naming the node, without harm to the next. */
START_TEST(device_on_gpu)
{
	if (!gpu_present(true))
		return;
	open_gpu();
	const loom_backend_vtable *vt = gpu.vt;
	loom_device_info info = {0};

	ck_assert_msg(LOOM_VT_HAS(vt, device_info), "no device_info");
	ck_assert_int_eq(vt->device_info(gpu.be, &info), LOOM_OK);
	ck_assert_msg(info.name[0] != '\0' && memchr(info.name, '\0', sizeof(info.name)) != NULL, "device name");
	ck_assert_msg(info.memory_total >= info.memory_free && info.memory_free > 0,
		      "device memory: total %llu, free %llu", (unsigned long long)info.memory_total,
		      (unsigned long long)info.memory_free);
	printf("cuda device: %s, %.1f of %.1f GiB free\n", info.name, info.memory_free / 1073741824.0,
	       info.memory_total / 1073741824.0);

	/* New buffers are zeroed. */
	const size_t size = 1 << 20;
	loom_buffer a, b;
	unsigned char *back = malloc(size);
	ck_assert(back != NULL);
	ck_assert_int_eq(vt->buffer_alloc(gpu.be, size, &a), LOOM_OK);
	ck_assert_int_eq(vt->buffer_alloc(gpu.be, size, &b), LOOM_OK);
	ck_assert_uint_eq(a.size, size);
	ck_assert_int_eq(vt->buffer_download(gpu.be, &a, 0, back, size), LOOM_OK);
	size_t nonzero = 0;
	for (size_t i = 0; i < size; i++)
		nonzero += back[i] != 0;
	ck_assert_msg(nonzero == 0, "%zu bytes of a new buffer are not zero", nonzero);

	/* A download is ordered after the compute before it. */
	const int64_t n = 65536;
	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
	ck_assert(x != NULL && y != NULL);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)i;
	ck_assert_int_eq(vt->buffer_upload(gpu.be, &a, 0, x, n * sizeof(float)), LOOM_OK);
	for (int64_t i = 0; i < n; i++)
		x[i] *= 3.0f;
	loom_tensor t = {.dtype = LOOM_DTYPE_F32, .ne = {n, 1, 1, 1}, .nb = {4, n * 4, n * 4, n * 4}, .data = a.base};
	loom_node node = {.op = LOOM_OP_SCALE, .dst = &t, .src = {&t}, .fp = {3.0f}};
	loom_graph g = {.n_nodes = 1, .nodes = &node};
	ck_assert_int_eq(vt->compute(gpu.be, &g), LOOM_OK);
	ck_assert_int_eq(vt->buffer_download(gpu.be, &a, 0, y, n * sizeof(float)), LOOM_OK);
	compare_exact("a download after SCALE", x, y, n * sizeof(float));

	/* An index outside the table or the cache fails the compute, naming
	 * the node; the next compute is not affected. */
	int32_t idx[2] = {1, 2};
	loom_tensor table = {.dtype = LOOM_DTYPE_F32, .ne = {4, 2, 1, 1}, .nb = {4, 16, 32, 32}, .data = a.base};
	loom_tensor ids = {.dtype = LOOM_DTYPE_I32, .ne = {2, 1, 1, 1}, .nb = {4, 8, 8, 8}, .data = b.base};
	loom_tensor rows = table;
	rows.data = (char *)a.base + 4096;
	for (int k = 0; k < 3; k++) {
		idx[1] = k == 0 ? 2 : k == 1 ? -1 : 0;
		node = (loom_node){.op = k == 1 ? LOOM_OP_KV_STORE : LOOM_OP_GET_ROWS, .dst = k == 1 ? &table : &rows,
				   .src = {k == 1 ? &rows : &table, &ids}};
		ck_assert_int_eq(vt->buffer_upload(gpu.be, &b, 0, idx, sizeof(idx)), LOOM_OK);
		test_clear_error();
		loom_status st = vt->compute(gpu.be, &g);
		if (k < 2)
			ck_assert_msg(st == LOOM_ERR_INVALID_ARGUMENT && strstr(test_plugin_error(), "node 0") != NULL,
				      "%s with index %d: status %d, error '%s'", k ? "KV_STORE" : "GET_ROWS", idx[1],
				      st, test_plugin_error());
		else
			ck_assert_msg(st == LOOM_OK, "GET_ROWS after failed ones: %d %s", st, test_plugin_error());
	}
	vt->buffer_free(gpu.be, &a);
	vt->buffer_free(gpu.be, &b);
	free(x);
	free(y);
	free(back);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* model: golden data on the GPU                                            */

/* Bands of max |logit - reference|, those of test_golden.c for the CPU
 * backends where the GPU rounds activations as the CPU does: F32 weights
 * (f32 matmuls), F16 (activations to fp16), and the types whose
 * activations the CPU quantizes to Q8_0 or Q8_1, whose d and q the GPU's
 * Q8_1 blocks repeat exactly. */
#define BAND_F32 1e-4f
#define BAND_GELU 1e-2f /* ggml's GELU is an fp16 table; loom's the formula */
#define BAND_F16 2e-2f
#define BAND_Q8 0.05f
#define BAND_Q 0.3f
/* K-quants: the reference (and loom's CPU) quantize activations to Q8_K,
 * the GPU to Q8_1 - another rounding of every activation, which these
 * small nets amplify. ../shared/golden/synthetic/README.md measured a
 * forward pass without activation quantization up to 0.58 from llama.cpp
 * on the K-quant files and suggests 0.75 for quantized models. */
#define BAND_K 0.75f

typedef struct gpu_model {
	const char *file;     /* under models/ */
	const char *golden;   /* under golden/ */
	float tol;
	const char *quantize; /* a scheme to quantize to at load (on the GPU), or NULL */
} gpu_model;

static const gpu_model gpu_models[] = {
	{"stories260K-f32.gguf", "stories260K-f32", BAND_F32, NULL},
	{"stories260K-f16.gguf", "stories260K-f16", BAND_F16, NULL},
	{"stories260K-q4_k_m.gguf", "stories260K-q4_k_m", BAND_K, NULL},
	{"stories260K-q5_k_m.gguf", "stories260K-q5_k_m", BAND_K, NULL},
	{"stories260K-q6_k.gguf", "stories260K-q6_k", BAND_K, NULL},
	{"stories260K-qwen2-f32.gguf", "stories260K-qwen2-f32", BAND_F32, NULL},
	{"llama-2-tiny-random.gguf", "llama-2-tiny-random", BAND_F16, NULL},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-f32", BAND_F32, NULL},
	{"stories-llama-d256-f16.gguf", "stories-llama-d256-f16", BAND_F16, NULL},
	{"stories-llama-d256-q8_0.gguf", "stories-llama-d256-q8_0", BAND_Q8, NULL},
	{"stories-llama-d256-q4_0.gguf", "stories-llama-d256-q4_0", BAND_Q, NULL},
	{"stories-llama-d256-q4_k_m.gguf", "stories-llama-d256-q4_k_m", BAND_K, NULL},
	{"stories-llama-d256-q5_k_m.gguf", "stories-llama-d256-q5_k_m", BAND_K, NULL},
	{"stories-llama-d256-q6_k.gguf", "stories-llama-d256-q6_k", BAND_K, NULL},
	{"stories-gpt2-d128-f16.gguf", "stories-gpt2-d128-f16", BAND_F16, NULL},
	{"stories-gpt2-d128-q8_0.gguf", "stories-gpt2-d128-q8_0", BAND_Q, NULL},
	{"stories260K-hf", "stories260K-f32", BAND_F32, NULL},
	{"stories-llama-d256-hf", "stories-llama-d256-f32", BAND_F32, NULL},
	{"stories-llama-d256-hf", "stories-llama-d256-q8_0", BAND_Q8, "q8_0"},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-q6_k", BAND_K, "q6_k"},
	{"synthetic/llama-f32.gguf", "synthetic/llama-f32", BAND_F32, NULL},
	{"synthetic/llama-q8_0.gguf", "synthetic/llama-q8_0", BAND_Q8, NULL},
	{"synthetic/llama-q4_0.gguf", "synthetic/llama-q4_0", BAND_Q, NULL},
	{"synthetic/llama-q4_1.gguf", "synthetic/llama-q4_1", BAND_Q, NULL},
	{"synthetic/llama-q5_0.gguf", "synthetic/llama-q5_0", BAND_Q, NULL},
	{"synthetic/llama-q5_1.gguf", "synthetic/llama-q5_1", BAND_Q, NULL},
	{"synthetic/llama-q2_k.gguf", "synthetic/llama-q2_k", BAND_K, NULL},
	{"synthetic/llama-q3_k.gguf", "synthetic/llama-q3_k", BAND_K, NULL},
	{"synthetic/llama-q4_k_m.gguf", "synthetic/llama-q4_k_m", BAND_K, NULL},
	{"synthetic/qwen2-f32.gguf", "synthetic/qwen2-f32", BAND_F32, NULL},
	{"synthetic/qwen2-q8_0.gguf", "synthetic/qwen2-q8_0", BAND_Q8, NULL},
	{"synthetic/qwen2-q4_k_m.gguf", "synthetic/qwen2-q4_k_m", BAND_K, NULL},
	{"synthetic/qwen3-f32.gguf", "synthetic/qwen3-f32", BAND_F32, NULL},
	{"synthetic/qwen3-q8_0.gguf", "synthetic/qwen3-q8_0", BAND_Q8, NULL},
	{"synthetic/qwen3-q4_k_m.gguf", "synthetic/qwen3-q4_k_m", BAND_K, NULL},
	{"synthetic/stablelm-f32.gguf", "synthetic/stablelm-f32", BAND_F32, NULL},
	{"synthetic/stablelm-q8_0.gguf", "synthetic/stablelm-q8_0", BAND_Q, NULL},
	{"synthetic/stablelm-q4_k_m.gguf", "synthetic/stablelm-q4_k_m", BAND_K, NULL},
	{"synthetic/gpt2-f32.gguf", "synthetic/gpt2-f32", BAND_GELU, NULL},
	{"synthetic/gpt2-q8_0.gguf", "synthetic/gpt2-q8_0", BAND_Q, NULL},
	{"synthetic/gpt2-q4_k_m.gguf", "synthetic/gpt2-q4_k_m", BAND_K, NULL},
	{"synthetic/phi2-f32.gguf", "synthetic/phi2-f32", BAND_GELU, NULL},
	{"synthetic/phi2-q8_0.gguf", "synthetic/phi2-q8_0", BAND_Q, NULL},
	{"synthetic/phi2-q4_k_m.gguf", "synthetic/phi2-q4_k_m", BAND_K, NULL},
	{"synthetic/starcoder2-f32.gguf", "synthetic/starcoder2-f32", BAND_GELU, NULL},
	{"synthetic/starcoder2-q8_0.gguf", "synthetic/starcoder2-q8_0", BAND_Q, NULL},
	{"synthetic/starcoder2-q4_k_m.gguf", "synthetic/starcoder2-q4_k_m", BAND_K, NULL},
	{"synthetic/gemma-f32.gguf", "synthetic/gemma-f32", BAND_GELU, NULL},
	{"synthetic/gemma-q8_0.gguf", "synthetic/gemma-q8_0", BAND_Q, NULL},
	{"synthetic/gemma-q4_k_m.gguf", "synthetic/gemma-q4_k_m", BAND_K, NULL},
};
#define N_GPU_MODELS ((int)N_OF(gpu_models))

/* llama-perplexity's value for golden name, or a negative number if the
 * reference has none. */
static double reference_ppl(const char *name)
{
	char path[4096];
	double v = -1.0;

	if (!test_data_path(path, sizeof(path), "golden/perplexity/results.json"))
		return v;
	char *text = test_read_file(path, NULL);
	cJSON *root = text != NULL ? cJSON_Parse(text) : NULL;
	const cJSON *ppl = cJSON_GetObjectItem(cJSON_GetObjectItem(root, name), "ppl");
	if (cJSON_IsNumber(ppl))
		v = ppl->valuedouble;
	cJSON_Delete(root);
	free(text);
	return v;
}

/* `loom perplexity` on cuda within 0.1% of llama-perplexity's (with the
 * reference's f16 KV cache, loom's default: measured on cpu-avx2 0.05% at
 * most); 0.5% for K-quants, whose activations the GPU rounds otherwise
 * (cpu-avx2, rounding them as llama.cpp does, is already 0.16% off on
 * stories260K-q6_k). */
static void check_perplexity(const gpu_model *gm)
{
	char model[4096], rel[512], text[4096];
	double want = reference_ppl(gm->golden), bound = gm->tol == BAND_K ? 5e-3 : 1e-3;

	snprintf(rel, sizeof(rel), "models/%s", gm->file);
	if (want < 0 || !test_data_path(model, sizeof(model), rel) ||
	    !test_data_path(text, sizeof(text), "golden/perplexity/ppl_story.txt"))
		return;
	cmd_result r = run_cmd("$LOOM perplexity -m %s -f %s -c 128 -b 128 --backend cuda --plugins %s", model, text,
			       test_plugins_file());
	ck_assert_msg(r.status == 0, "%s: loom perplexity on cuda: exit %d: %s", gm->golden, r.status, r.err);
	const char *at = strstr(r.out, "PPL = ");
	ck_assert_msg(at != NULL, "%s: no PPL line in '%s'", gm->golden, r.out);
	double got = strtod(at + 6, NULL), off = fabs(got - want) / want;
	printf("perplexity %-28s cuda %.4f (llama.cpp %.4f, %.3f%%)\n", gm->golden, got, want, off * 100);
	ck_assert_msg(off <= bound, "%s on cuda: PPL %.4f, llama.cpp %.4f (%.3f%% apart, at most %.1f%%)", gm->golden,
		      got, want, off * 100, bound * 100);
	cmd_result_free(&r);
}

START_TEST(model_on_gpu)
{
	const gpu_model *gm = &gpu_models[_i];

	if (!gpu_present(_i == 0) || !shared_data(_i == 0) || !carried(gm->file, gm->golden))
		return;
	loom_runtime *rt = test_runtime("cuda", 1);
	ck_assert_msg(rt != NULL, "cuda probed usable, but the runtime calls it unusable");
	ck_assert_str_eq(loom_runtime_backend_name(rt), "cuda");
	loom_device_info dev;
	ck_assert_int_eq(loom_runtime_device(rt, &dev), LOOM_OK);
	ck_assert_msg(dev.name[0] != '\0' && dev.memory_total >= dev.memory_free, "device '%s'", dev.name);
	loom_model_params mp = loom_model_default_params();
	mp.quantize = gm->quantize;
	loom_model *m = test_model_with(rt, gm->file, &mp);
	char label[64];
	snprintf(label, sizeof(label), "cuda%s%s", gm->quantize ? " at-load " : "", gm->quantize ? gm->quantize : "");
	golden_check_model(m, gm->golden, gm->tol, label);
	loom_model_free(m);
	loom_runtime_free(rt);
	/* The perplexity reference is of the file itself. */
	char own[300];
	snprintf(own, sizeof(own), "%s.gguf", gm->golden);
	if (gm->quantize == NULL && strcmp(own, gm->file) == 0)
		check_perplexity(gm);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* kv: the cache on the GPU, step by step against cpu-generic               */

typedef struct kv_config {
	const char *file;
	loom_dtype kv_type;
	float tol;
} kv_config;

static const kv_config kv_configs[] = {
	{"stories260K-f32.gguf", LOOM_DTYPE_F32, BAND_F32},
	/* An fp16 cache: an fp16 rounding of q or p that flips moves logits by
	 * ~5e-3; along this scenario cpu-avx2 and cpu-generic, which round at
	 * the same points, came 0.0136 apart; the GPU may round elsewhere. */
	{"stories260K-f32.gguf", LOOM_DTYPE_F16, 5e-2f},
	/* Grouped-query attention, NEOX RoPE, biases. */
	{"synthetic/qwen2-f32.gguf", LOOM_DTYPE_F32, BAND_F32},
};

#define KV_N_CTX 256

/* The same model on cpu-generic (0) and cuda (1), run in lockstep. */
typedef struct kv_pair {
	const kv_config *cfg;
	loom_runtime *rt[2];
	loom_model *m[2];
	loom_context *ctx[2];
	int n_vocab;
	float worst;
} kv_pair;

/* Decodes batch on both; they must agree on the status and, where it is
 * LOOM_OK, on the logits of every token that asked for them. */
static loom_status decode_both(kv_pair *p, const loom_batch *b, const char *step)
{
	loom_status st[2];

	for (int k = 0; k < 2; k++)
		st[k] = loom_decode(p->ctx[k], b);
	ck_assert_msg(st[0] == st[1], "%s: %s: cpu-generic says %d, cuda %d (%s)", p->cfg->file, step, st[0], st[1],
		      loom_last_error());
	if (st[0] != LOOM_OK)
		return st[0];
	for (int i = 0; i < b->n_tokens; i++) {
		if (b->logits != NULL ? !b->logits[i] : i != b->n_tokens - 1)
			continue;
		const float *want = loom_get_logits(p->ctx[0], i), *got = loom_get_logits(p->ctx[1], i);
		ck_assert_msg(want != NULL && got != NULL, "%s: %s: no logits for token %d", p->cfg->file, step, i);
		int64_t bad = ref_first_nonfinite(got, (size_t)p->n_vocab);
		ck_assert_msg(bad < 0, "%s: %s: token %d, logit %lld is not finite on cuda", p->cfg->file, step, i,
			      (long long)bad);
		float d = 0.0f;
		for (int v = 0; v < p->n_vocab; v++)
			d = fmaxf(d, fabsf(got[v] - want[v]));
		ck_assert_msg(d <= p->cfg->tol, "%s: %s: token %d: max |cuda - cpu-generic| = %g > %g", p->cfg->file,
			      step, i, d, p->cfg->tol);
		p->worst = fmaxf(p->worst, d);
	}
	return LOOM_OK;
}

/* One token of sequence 0 at the next position, on both. */
static void step_both(kv_pair *p, loom_token tok, const char *what, int i)
{
	char step[96];
	loom_batch b = {.n_tokens = 1, .tokens = &tok};

	snprintf(step, sizeof(step), "%s %d", what, i);
	ck_assert_int_eq(decode_both(p, &b, step), LOOM_OK);
}

/* cpu-generic's choice after the last decode (its one logits row). */
static loom_token next_token(kv_pair *p, int i)
{
	return test_argmax(loom_get_logits(p->ctx[0], i), p->n_vocab);
}

static void expect_cells(kv_pair *p, int32_t seq, int32_t pos_max, uint32_t used, const char *when)
{
	for (int k = 0; k < 2; k++) {
		ck_assert_msg(loom_kv_seq_pos_max(p->ctx[k], seq) == pos_max && loom_kv_used(p->ctx[k]) == used,
			      "%s: %s on %s: sequence %d ends at %d with %u cells used, expected %d and %u",
			      p->cfg->file, when, k ? "cuda" : "cpu-generic", seq, loom_kv_seq_pos_max(p->ctx[k], seq),
			      loom_kv_used(p->ctx[k]), pos_max, used);
	}
}

static int tokenize(kv_pair *p, const char *text, loom_token *out, size_t cap)
{
	size_t n = 0;
	ck_assert_int_eq(loom_tokenize(p->m[0], text, strlen(text), true, false, out, cap, &n), LOOM_OK);
	ck_assert(n > 0);
	return (int)n;
}

START_TEST(kv_on_gpu)
{
	kv_pair p = {.cfg = &kv_configs[_i]};
	static const char *const names[2] = {"cpu-generic", "cuda"};
	loom_token a[64], b[64], toks[KV_N_CTX];
	int8_t all[KV_N_CTX];

	if (!gpu_present(_i == 0) || !shared_data(_i == 0) || !carried(p.cfg->file, NULL))
		return;
	for (int k = 0; k < 2; k++) {
		p.rt[k] = test_runtime(names[k], k ? 1 : 0);
		ck_assert_msg(p.rt[k] != NULL, "no %s runtime", names[k]);
		p.m[k] = test_model(p.rt[k], p.cfg->file);
		p.ctx[k] = test_context(p.m[k], KV_N_CTX, KV_N_CTX, p.cfg->kv_type);
	}
	p.n_vocab = loom_model_n_vocab(p.m[0]);
	memset(all, 1, sizeof(all));

	/* A prompt, logits everywhere, then 200 single-token steps (the
	 * tokens cpu-generic picks, fed to both). */
	int na = tokenize(&p, "Once upon a time", a, N_OF(a));
	loom_batch pb = {.n_tokens = na, .tokens = a, .logits = all};
	ck_assert_int_eq(decode_both(&p, &pb, "prompt"), LOOM_OK);
	loom_token tok = next_token(&p, na - 1);
	for (int i = 0; i < 200; i++) {
		step_both(&p, tok, "decode", i);
		tok = next_token(&p, 0);
	}
	expect_cells(&p, 0, na + 199, (uint32_t)na + 200, "after 200 steps");

	/* Drop everything from position 100 on and go another way from
	 * there; then punch a hole at 40..59 and go on past it. */
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(loom_kv_seq_remove(p.ctx[k], 0, 100, -1), LOOM_OK);
	expect_cells(&p, 0, 99, 100, "after removing 100..");
	tok = (tok + 1) % p.n_vocab;
	for (int i = 0; i < 20; i++) {
		step_both(&p, tok, "re-decode", i);
		tok = next_token(&p, 0);
	}
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(loom_kv_seq_remove(p.ctx[k], 0, 40, 60), LOOM_OK);
	expect_cells(&p, 0, 119, 100, "after removing 40..59");
	for (int i = 0; i < 5; i++) {
		step_both(&p, tok, "past the hole", i);
		tok = next_token(&p, 0);
	}

	/* Two sequences in one batch, interleaved, each at its own
	 * positions; then both grow one token per batch; then one goes. */
	for (int k = 0; k < 2; k++)
		loom_kv_clear(p.ctx[k]);
	int nb = tokenize(&p, "The quick brown fox", b, N_OF(b)), n2 = 0, last[2] = {0, 0};
	int32_t pos[128], seq[128];
	for (int i = 0; i < na || i < nb; i++) {
		for (int s = 0; s < 2; s++) {
			if (i < (s ? nb : na)) {
				toks[n2] = s ? b[i] : a[i];
				pos[n2] = i;
				seq[n2] = s;
				last[s] = n2++;
			}
		}
	}
	loom_batch two = {.n_tokens = n2, .tokens = toks, .pos = pos, .seq_id = seq, .logits = all};
	ck_assert_int_eq(decode_both(&p, &two, "two sequences"), LOOM_OK);
	loom_token next[2] = {next_token(&p, last[0]), next_token(&p, last[1])};
	for (int i = 0; i < 10; i++) {
		char step[64];
		snprintf(step, sizeof(step), "two sequences, step %d", i);
		int32_t s2[2] = {0, 1};
		loom_batch g = {.n_tokens = 2, .tokens = next, .seq_id = s2, .logits = all};
		ck_assert_int_eq(decode_both(&p, &g, step), LOOM_OK);
		next[0] = next_token(&p, 0);
		next[1] = next_token(&p, 1);
	}
	expect_cells(&p, 1, nb + 9, (uint32_t)(na + nb + 20), "after two sequences");
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(loom_kv_seq_remove(p.ctx[k], 1, 0, -1), LOOM_OK);
	expect_cells(&p, 0, na + 9, (uint32_t)na + 10, "after dropping sequence 1");
	step_both(&p, next[0], "sequence 0 alone", 0);

	/* Fill the context: n_ctx - 1 tokens in one batch, one more, then
	 * one too many. */
	for (int k = 0; k < 2; k++)
		loom_kv_clear(p.ctx[k]);
	for (int i = 0; i < KV_N_CTX; i++)
		toks[i] = i < na ? a[i] : (loom_token)((i * 37 + 11) % p.n_vocab);
	loom_batch fill = {.n_tokens = KV_N_CTX - 1, .tokens = toks};
	ck_assert_int_eq(decode_both(&p, &fill, "filling the context"), LOOM_OK);
	step_both(&p, toks[KV_N_CTX - 1], "the last cell", 0);
	expect_cells(&p, 0, KV_N_CTX - 1, KV_N_CTX, "full");
	loom_batch over = {.n_tokens = 1, .tokens = toks};
	ck_assert_int_eq(decode_both(&p, &over, "past the end"), LOOM_ERR_CONTEXT_FULL);
	expect_cells(&p, 0, KV_N_CTX - 1, KV_N_CTX, "after a refused decode");

	printf("kv %-28s %s cache: max |cuda - cpu-generic| %.3g\n", p.cfg->file, dtype_name(p.cfg->kv_type),
	       p.worst);
	for (int k = 0; k < 2; k++) {
		loom_context_free(p.ctx[k]);
		loom_model_free(p.m[k]);
		loom_runtime_free(p.rt[k]);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* families: the models of 2026's families on the GPU                      */

/* Every node of each family model's one-token and 4-token steps, as the
 * core builds them (on cpu-generic, whose weights keep the files' layout),
 * is one cuda's supports() takes: no family leaves an op, a shape or a
 * view to chance on a GPU. Host code, run with or without a device. */
static void step_nodes_supported(const loom_graph *graph, int n_tokens, void *arg)
{
	const char *family = arg;
	const loom_backend_vtable *vt = cuda_desc->vtable;
	for (int i = 0; i < graph->n_nodes; i++) {
		const loom_node *node = &graph->nodes[i];
		const char *weight = node->src[0] != NULL && node->src[0]->name != NULL ? node->src[0]->name : "";
		ck_assert_msg(vt->supports(NULL, node), "%s, %d tokens: cuda refuses node %d, %s %s", family, n_tokens, i,
			      loom_op_name(node->op), weight);
	}
}

START_TEST(family_nodes_supported)
{
	int n;
	const family_model *fm = &family_models(&n)[_i];
	if (!cuda_probed()) {
		if (_i == 0)
			printf("SKIP: loom-cuda.so not built (no CUDA toolkit)\n");
		return;
	}
	/* The steps are built from files written as configured. */
	if (fm->scheme != NULL)
		return;
	family_model_steps(fm->name, "cuda_supports", step_nodes_supported, (void *)fm->name);
}
END_TEST

/* Each family model (tests/support/family_models.c: written by the test
 * itself, so nothing is carried for it) on cuda against its reference
 * file, in test_families' bands: experts and their routing, MXFP4,
 * windows, soft-caps, sinks, post-norms and multipliers through the cuda
 * kernels. */
START_TEST(family_on_gpu)
{
	int n;
	const family_model *fm = &family_models(&n)[_i];
	if (!gpu_present(_i == 0))
		return;
	family_ref ref;
	char path[4200];
	family_ref_load(fm->name, &ref);
	family_model_write_tmp(fm, "cuda", path, sizeof(path));
	ck_assert_msg(family_check_on(fm, path, &ref, "cuda"), "cuda probed usable, but the runtime calls it unusable");
	family_ref_free(&ref);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* nodes: each node of real steps on the GPU against cpu-generic's         */

/* The largest error a node may show against cpu-generic on the same
 * inputs (max |cuda - cpu| over max |cpu|): with float weights, sums in
 * another order and the device's exp; with quantized ones, activations
 * quantized in Q8_1 blocks of 32 where the CPU takes Q8_0 or, for the
 * K-quants, Q8_K blocks of 256 (test_backend_ops allows those 1e-3 of a
 * product's energy: about 0.03 of an output, more for the largest of
 * many). A wrong kernel is off by 0.1 to 1. */
#define NODE_BAND_FLOAT 1e-3
#define NODE_BAND_QUANTIZED 6e-2

/* Model path's steps on cuda, a node at a time, each node's output set to
 * cpu-generic's before the next runs (tests/support/step_nodes.h): where a
 * model's logits part, the first node past its band names the kernel. */
static void nodes_on_gpu(const char *path, const char *name, bool float_weights, int n_seq)
{
	step_nodes_config cfg = {.n_threads = 2, .n_seq = n_seq, .n_prompt = n_seq > 1 ? 5 : 12, .n_decode = 3,
				 .kv_type = LOOM_DTYPE_F16,
				 .band = float_weights ? NODE_BAND_FLOAT : NODE_BAND_QUANTIZED};
	ck_assert_msg(step_nodes_agree(path, name, "cpu-generic", "cuda", &cfg),
		      "cuda probed usable, but the runtime calls it unusable");
}

START_TEST(family_nodes_on_gpu)
{
	const char *name = step_nodes_families[_i];
	const family_model *fm = family_model_named(name);
	if (!gpu_present(_i == 0))
		return;
	ck_assert_msg(fm != NULL, "no family model %s", name);
	char path[4200];
	family_model_write_tmp(fm, "cuda", path, sizeof(path));
	/* One sequence, and three decoded together. */
	nodes_on_gpu(path, name, strstr(name, "-f32") != NULL, 1);
	nodes_on_gpu(path, name, strstr(name, "-f32") != NULL, 3);
}
END_TEST

/* The golden models carried (files, not checkpoints or quantized at
 * load): where one of them fails model_on_gpu, this names the node. */
START_TEST(golden_model_nodes_on_gpu)
{
	const gpu_model *gm = &gpu_models[_i];
	char rel[300], path[4200];
	if (!gpu_present(_i == 0) || !shared_data(_i == 0) || gm->quantize != NULL || strstr(gm->file, ".gguf") == NULL ||
	    !carried(gm->file, NULL))
		return;
	snprintf(rel, sizeof(rel), "models/%s", gm->file);
	ck_assert(test_data_path(path, sizeof(path), rel));
	nodes_on_gpu(path, gm->file, strstr(gm->file, "-f32") != NULL, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *cuda_suite(void)
{
	Suite *s = suite_create("cuda");
	TCase *tc = tcase_create("probe");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, probe_plugin);
	suite_add_tcase(s, tc);

	tc = tcase_create("device");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, device_on_gpu);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, model_on_gpu, 0, N_GPU_MODELS);
	suite_add_tcase(s, tc);

	tc = tcase_create("kv");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, kv_on_gpu, 0, (int)N_OF(kv_configs));
	suite_add_tcase(s, tc);

	int n_families;
	family_models(&n_families);
	tc = tcase_create("families");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, family_nodes_supported, 0, n_families);
	tcase_add_loop_test(tc, family_on_gpu, 0, n_families);
	suite_add_tcase(s, tc);

	tc = tcase_create("nodes");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, family_nodes_on_gpu, 0, step_nodes_n_families);
	tcase_add_loop_test(tc, golden_model_nodes_on_gpu, 0, N_GPU_MODELS);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cuda_suite)

