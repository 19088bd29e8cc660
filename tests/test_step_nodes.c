/*
 * test_step_nodes.c - every CPU backend against cpu-generic, node by node,
 * on the real steps of every family model (experts and their routing,
 * windows, soft-caps, sinks, MXFP4, K-quants, fused projections; F32,
 * Q8_0 and Q4_K_M) and of the shared models (every weight type): a prompt, then greedy decode steps, each run a node at a
 * time on both backends, every activation a node writes read back from
 * each and compared (tests/support/step_nodes.h).
 *
 * The golden and family suites compare the logits; this one says which
 * node parts first when they part, and holds every node of the optimised
 * backends - the repacked products, the attention kernels, the routing -
 * to cpu-generic's scalar reading of the same ops within a band near
 * float rounding: the backends multiply the same quantized activations
 * and differ in the order of their sums alone. test_cuda runs the same
 * comparison for cuda on a GPU.
 */
#include "check_main.h"
#include "family_check.h"
#include "family_models.h"
#include "fixture.h"
#include "step_nodes.h"
#include "testdata.h"

#include <stdio.h>
#include <string.h>

/* The largest error the CPU backends may show against cpu-generic at any
 * node on the same inputs (max |b - a| over max |a|): the worst seen here
 * is 5.2e-6, Qwen2-MoE's shared-expert gate, one dot product a token whose
 * terms cancel; a wrong kernel is off by 1e-3 to 1. cpu-amx's F16
 * products carry the activations as two bf16 parts, 16 bits of their 24
 * (2^-17 each, as the op's contract allows), where the others keep them
 * whole. */
#define CPU_BAND 3e-5
#define AMX_BAND 1e-4

/* One sequence: a prompt of 12 tokens and 3 greedy steps, an F16 cache. */
static const step_nodes_config one_sequence = {
	.n_threads = 2, .n_seq = 1, .n_prompt = 12, .n_decode = 3, .kv_type = LOOM_DTYPE_F16,
};

/* Compares backend b with cpu-generic on path; false (SKIP said) where b
 * cannot run here. */
static bool nodes_agree(const char *path, const char *name, const char *b, const step_nodes_config *base)
{
	step_nodes_config cfg = *base;
	cfg.band = strcmp(b, "cpu-amx") == 0 ? AMX_BAND : CPU_BAND;
	return step_nodes_agree(path, name, "cpu-generic", b, &cfg);
}

/* Every optimised CPU backend against cpu-generic on path. */
static void cpu_backends_agree(const char *path, const char *name, const step_nodes_config *cfg)
{
	for (int k = 0; k < test_n_cpu_backends; k++)
		if (strcmp(test_cpu_backends[k], "cpu-generic") != 0)
			(void)nodes_agree(path, name, test_cpu_backends[k], cfg);
}

START_TEST(families_on_cpu_backends)
{
	int n;
	const family_model *fm = &family_models(&n)[_i];
	const char *name = fm->name;
	char path[4200];
	family_model_write_tmp(fm, "step_nodes", path, sizeof(path));
	cpu_backends_agree(path, name, &one_sequence);
}
END_TEST

/* The shared models: every weight type the synthetic ones hold (Q2_K to
 * Q8_0, F16 and F32) and the blocks of seven more families. */
static const char *const shared_models[] = {
	"stories260K-q4_k_m.gguf", "stories260K-f16.gguf", "stories-llama-d256-q6_k.gguf",
	"stories-gpt2-d128-q8_0.gguf", "llama-2-tiny-random.gguf", "synthetic/llama-q2_k.gguf",
	"synthetic/llama-q3_k.gguf", "synthetic/llama-q4_0.gguf", "synthetic/llama-q4_1.gguf",
	"synthetic/llama-q5_0.gguf", "synthetic/llama-q5_1.gguf", "synthetic/gemma-q4_k_m.gguf",
	"synthetic/gpt2-f32.gguf", "synthetic/phi2-q8_0.gguf", "synthetic/qwen2-q4_k_m.gguf",
	"synthetic/qwen3-q8_0.gguf", "synthetic/stablelm-q4_k_m.gguf", "synthetic/starcoder2-q8_0.gguf",
};

START_TEST(shared_models_on_cpu_backends)
{
	char rel[256], path[4200];
	snprintf(rel, sizeof(rel), "models/%s", shared_models[_i]);
	if (!test_data_path(path, sizeof(path), rel))
		return;
	cpu_backends_agree(path, shared_models[_i], &one_sequence);
}
END_TEST

/* Three sequences decoded together (their prompts of 5 tokens in one
 * batch, then a token of each a step), over caches of every type: the
 * batched attention, the mask between sequences, and the cache rows each
 * type stores and reads. */
typedef struct cache_case {
	const char *family;
	loom_dtype kv_type;
} cache_case;

/* Quantized caches store blocks of 32 values of a head: gpt-oss's heads
 * here have 16, so its cases keep float caches. */
static const cache_case cache_cases[] = {
	{"gemma3-q8_0", LOOM_DTYPE_F16},    {"gemma3-q8_0", LOOM_DTYPE_F32},    {"gemma3-q8_0", LOOM_DTYPE_Q8_0},
	{"gemma3-q8_0", LOOM_DTYPE_Q4_0},   {"qwen3moe-f32", LOOM_DTYPE_F16},   {"qwen3moe-f32", LOOM_DTYPE_Q8_0},
	{"qwen3moe-f32", LOOM_DTYPE_Q4_0},  {"dots1-q4_k_m", LOOM_DTYPE_F16},   {"dots1-q4_k_m", LOOM_DTYPE_Q8_0},
	{"dots1-q4_k_m", LOOM_DTYPE_Q4_0},  {"gpt-oss-mxfp4", LOOM_DTYPE_F16},  {"gpt-oss-mxfp4", LOOM_DTYPE_F32},
};

START_TEST(sequences_and_caches_on_cpu_backends)
{
	const cache_case *c = &cache_cases[_i];
	const family_model *fm = family_model_named(c->family);
	ck_assert(fm != NULL);
	char path[4200];
	family_model_write_tmp(fm, "step_nodes", path, sizeof(path));
	step_nodes_config cfg = {.n_threads = 2, .n_seq = 3, .n_prompt = 5, .n_decode = 3, .kv_type = c->kv_type};
	cpu_backends_agree(path, fm->name, &cfg);
}
END_TEST

static Suite *step_nodes_suite(void)
{
	Suite *s = suite_create("step_nodes");
	TCase *tc = tcase_create("cpu");
	int n_families;
	family_models(&n_families);
	tcase_add_loop_test(tc, families_on_cpu_backends, 0, n_families);
	tcase_add_loop_test(tc, shared_models_on_cpu_backends, 0, (int)(sizeof(shared_models) / sizeof(shared_models[0])));
	tcase_add_loop_test(tc, sequences_and_caches_on_cpu_backends, 0,
			    (int)(sizeof(cache_cases) / sizeof(cache_cases[0])));
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(step_nodes_suite)
