/* test_quantize.c - `loom quantize` end to end: the stories-llama-d256 f32
 * model quantized by loom to each scheme llama.cpp also made from it, then
 * compared with llama.cpp's file - the type of every tensor, the blocks
 * themselves, and the perplexity of the result. */
#include "check_main.h"
#include "plugin_host.h"
#include "run_cmd.h"
#include "testdata.h"

#include "model/meta.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct scheme_case {
	const char *scheme;
	const char *reference; /* llama.cpp's file from the same source */
	double same_blocks;    /* least share of byte-identical tensor bytes */
} scheme_case;

/* The 32-element types quantize by plain rounding, so loom's blocks of
 * those types equal llama.cpp's but for rare rounding ties; the K-quants
 * (including the Q6_K head of the Q4_0 file) search for scales and may
 * settle on other ones, so for them only the perplexity is compared. */
static const scheme_case cases[] = {
	{"q8_0", "stories-llama-d256-q8_0", 0.99},
	{"q4_0", "stories-llama-d256-q4_0", 0.99},
	{"q4_k_m", "stories-llama-d256-q4_k_m", 0.0},
	{"q5_k_m", "stories-llama-d256-q5_k_m", 0.0},
};
#define N_CASES ((int)(sizeof(cases) / sizeof(cases[0])))

static double reference_ppl(const char *name)
{
	char path[4096];
	ck_assert(test_data_path(path, sizeof(path), "golden/perplexity/results.json"));
	char *text = test_read_file(path, NULL);
	cJSON *root = cJSON_Parse(text);
	double v = cJSON_GetObjectItem(cJSON_GetObjectItem(root, name), "ppl")->valuedouble;
	cJSON_Delete(root);
	free(text);
	return v;
}

static const loom_file_tensor *find(const loom_model_file *f, loom_string name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (f->tensors[i].name.len == name.len && memcmp(f->tensors[i].name.data, name.data, name.len) == 0)
			return &f->tensors[i];
	return NULL;
}

/* Every tensor has llama.cpp's type; returns the share of the bytes of
 * 32-element-block tensors that are identical to llama.cpp's (1 if none). */
static double compare_files(const char *ours_path, const char *ref_path, const char *scheme)
{
	loom_model_file *ours = test_open_gguf(ours_path);
	ck_assert_msg(ours != NULL, "%s: %s", ours_path, test_plugin_error());
	loom_model_file *ref = test_open_gguf(ref_path);
	ck_assert_msg(ref != NULL, "%s: %s", ref_path, test_plugin_error());
	uint64_t same = 0, total = 0;
	for (uint64_t i = 0; i < ref->n_tensors; i++) {
		const loom_file_tensor *r = &ref->tensors[i], *o = find(ours, r->name);
		ck_assert_msg(o != NULL, "%s lacks %.*s", scheme, (int)r->name.len, r->name.data);
		ck_assert_msg(o->dtype == r->dtype && o->n_bytes == r->n_bytes, "%s: %.*s is %s, llama.cpp has %s",
			      scheme, (int)r->name.len, r->name.data, loom_dtype_traits_of(o->dtype).name,
			      loom_dtype_traits_of(r->dtype).name);
		if (loom_dtype_traits_of(r->dtype).block != 32)
			continue;
		const unsigned char *a = o->data, *b = r->data;
		for (uint64_t k = 0; k < r->n_bytes; k++)
			same += a[k] == b[k];
		total += r->n_bytes;
	}
	int64_t ft_ours, ft_ref;
	ck_assert(loom_meta_get_int(ours, "general.file_type", &ft_ours) == LOOM_OK);
	ck_assert(loom_meta_get_int(ref, "general.file_type", &ft_ref) == LOOM_OK);
	ck_assert_msg(ft_ours == ft_ref, "%s: file_type %lld, llama.cpp %lld", scheme, (long long)ft_ours,
		      (long long)ft_ref);
	test_close_gguf(ours);
	test_close_gguf(ref);
	return total > 0 ? (double)same / (double)total : 1.0;
}

START_TEST(quantized_file_matches_llama_cpp)
{
	const scheme_case *c = &cases[_i];
	char src[4096], ref[4096], rel[256], text[4096], out[4200];
	snprintf(rel, sizeof(rel), "models/%s.gguf", c->reference);
	if (!test_data_path(src, sizeof(src), "models/stories-llama-d256-f32.gguf") ||
	    !test_data_path(ref, sizeof(ref), rel) || !test_data_path(text, sizeof(text), "golden/perplexity/ppl_story.txt"))
		return;
	snprintf(out, sizeof(out), "%s/%s.gguf", test_tmp_dir(c->scheme), c->scheme);
	cmd_result r = run_cmd("$LOOM quantize %s %s %s --plugins %s/plugins.yaml", src, out, c->scheme,
			       LOOM_TEST_BUILD_DIR);
	ck_assert_msg(r.status == 0, "quantize %s: exit %d: %s", c->scheme, r.status, r.err);
	cmd_result_free(&r);

	double same = compare_files(out, ref, c->scheme);
	ck_assert_msg(same >= c->same_blocks, "%s: only %.4f of the bytes equal llama.cpp's", c->scheme, same);

	r = run_cmd("$LOOM perplexity -m %s -f %s -c 128 -b 128 --plugins %s/plugins.yaml", out, text,
		    LOOM_TEST_BUILD_DIR);
	ck_assert_msg(r.status == 0, "perplexity: %s", r.err);
	const char *at = strstr(r.out, "PPL = ");
	ck_assert_msg(at != NULL, "no PPL in %s", r.out);
	double ppl = strtod(at + 6, NULL), want = reference_ppl(c->reference);
	double source = reference_ppl("stories-llama-d256-f32");
	printf("quantize %-7s identical bytes %.4f, PPL %.4f (llama.cpp's file %.4f, f32 source %.4f)\n", c->scheme,
	       same, ppl, want, source);
	ck_assert_msg(fabs(ppl - want) / want < 0.005, "%s: PPL %.4f, llama.cpp's %s has %.4f", c->scheme, ppl,
		      c->reference, want);
	cmd_result_free(&r);
}
END_TEST

/* Progress: through the API, once per tensor with the bytes done growing
 * to the total; from the command, a line redrawn on a terminal (script(1)
 * gives it one) and nothing but the summary when stderr is a file. */
typedef struct progress_log {
	size_t calls, count, last_index;
	uint64_t last_done, total;
	bool ordered;
} progress_log;

static void record_progress(void *user, const loom_convert_progress *p)
{
	progress_log *log = user;
	log->ordered = log->ordered && p->index == log->calls && p->bytes_done > log->last_done &&
		       p->bytes_done <= p->bytes_total && p->name != NULL && p->name[0] != '\0';
	log->calls++;
	log->count = p->count;
	log->last_index = p->index;
	log->last_done = p->bytes_done;
	log->total = p->bytes_total;
}

START_TEST(quantize_shows_progress)
{
	char src[4096], out[4200];
	if (!test_data_path(src, sizeof(src), "models/stories260K-f32.gguf"))
		return;
	snprintf(out, sizeof(out), "%s/q.gguf", test_tmp_dir("quantize_progress"));
	loom_runtime_params rp = loom_runtime_default_params();
	rp.plugins_file = LOOM_TEST_BUILD_DIR "/plugins.yaml";
	loom_runtime *rt = NULL;
	ck_assert(loom_runtime_create(&rp, &rt) == LOOM_OK);
	progress_log log = {.ordered = true};
	loom_quantize_params qp = loom_quantize_default_params();
	qp.scheme = "q8_0";
	qp.progress = record_progress;
	qp.progress_user = &log;
	ck_assert_msg(loom_quantize(rt, src, out, &qp) == LOOM_OK, "%s", loom_last_error());
	loom_runtime_free(rt);
	loom_model_file *in = test_open_gguf(src);
	uint64_t bytes = 0;
	for (uint64_t i = 0; i < in->n_tensors; i++)
		bytes += in->tensors[i].n_bytes;
	ck_assert_msg(log.ordered, "progress out of order");
	ck_assert_uint_eq(log.calls, in->n_tensors);
	ck_assert_uint_eq(log.count, in->n_tensors);
	ck_assert_uint_eq(log.last_done, bytes);
	ck_assert_uint_eq(log.total, bytes);
	test_close_gguf(in);

	cmd_result r = run_cmd("$LOOM quantize %s %s q8_0 --plugins %s/plugins.yaml 2>&1", src, out, LOOM_TEST_BUILD_DIR);
	ck_assert_msg(r.status == 0 && strstr(r.out, "tensor ") == NULL && strchr(r.out, '\n') == r.out + strlen(r.out) - 1,
		      "not a terminal: exit %d, '%s'", r.status, r.out);
	cmd_result_free(&r);
	r = run_cmd("script -qec \"$LOOM quantize %s %s q8_0 --plugins %s/plugins.yaml\" /dev/null", src, out,
		    LOOM_TEST_BUILD_DIR);
	char last[64];
	snprintf(last, sizeof(last), "tensor %zu of %zu, ", log.count, log.count);
	ck_assert_msg(r.status == 0 && strstr(r.out, "\rloom: tensor 1 of ") != NULL && strstr(r.out, last) != NULL &&
			      strstr(r.out, " s: ") != NULL,
		      "on a terminal: exit %d, '%s'", r.status, r.out);
	cmd_result_free(&r);
}
END_TEST

START_TEST(bad_requests_exit_1)
{
	char src[4096];
	if (!test_data_path(src, sizeof(src), "models/stories260K-f32.gguf"))
		return;
	const char *fmt[] = {
		"$LOOM quantize %s /tmp/loom-q-x.gguf q3_xl --plugins %s/plugins.yaml",
		"$LOOM quantize %s %s q8_0 --plugins %s/plugins.yaml",
		"$LOOM quantize /nonexistent.gguf /tmp/loom-q-x.gguf q8_0 --plugins %s/plugins.yaml",
		"$LOOM quantize %s --plugins %s/plugins.yaml",
	};
	cmd_result r[4] = {
		run_cmd(fmt[0], src, LOOM_TEST_BUILD_DIR), run_cmd(fmt[1], src, src, LOOM_TEST_BUILD_DIR),
		run_cmd(fmt[2], LOOM_TEST_BUILD_DIR), run_cmd(fmt[3], src, LOOM_TEST_BUILD_DIR),
	};
	for (int i = 0; i < 4; i++) {
		ck_assert_msg(r[i].status == 1 && strncmp(r[i].err, "loom", 4) == 0, "case %d: exit %d, %s", i,
			      r[i].status, r[i].err);
		cmd_result_free(&r[i]);
	}
}
END_TEST

static Suite *quantize_suite(void)
{
	Suite *s = suite_create("quantize");
	TCase *tc = tcase_create("quantize");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, quantized_file_matches_llama_cpp, 0, N_CASES);
	tcase_add_test(tc, bad_requests_exit_1);
	tcase_add_test(tc, quantize_shows_progress);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(quantize_suite)
