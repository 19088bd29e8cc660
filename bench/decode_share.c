/*
 * decode_share.c - a decode's share of the memory's read bandwidth, with the
 * bandwidth read a few milliseconds before and after the decode it bounds:
 *
 *   loom-bench-decode-share MODEL [-t THREADS] [-r ROUNDS] [-x NEAR_NS]
 *
 * A round reads a 256 MiB buffer as ../shared/tools/membw.c does (each
 * thread sums its contiguous slice: the plain reading), then reads as many
 * bytes as a decode step reads, in pieces of the step's sizes (each
 * weight's bytes a token reads, its chosen experts as one piece, in the
 * model's tensor order, each shared among the threads with a barrier after
 * it: the pattern reading), times 8 decode steps of random tokens from a
 * short cache, and takes the plain reading again. Both readings' memory is
 * advised into huge pages, as the CPU backends' weights are. A round's share is the bytes a
 * token reads times its tokens a second over the higher plain reading.
 *
 * On a machine whose memory is shared with other tenants the bandwidth
 * moves by tens of percent within a second, so a reading a minute away
 * from the decode bounds it loosely; here every round carries its own.
 * Each round also times a cache line passed back and forth between the
 * first and the last thread: a virtual machine's cores may sit on one
 * die, sharing its L3 and its link to memory, or on two, where every line
 * one core wrote and the other reads crosses between dies (several times
 * the round trip) and each die brings its own bandwidth. The rounds are
 * reported in two groups: near, a round trip under -x NS (250 by default:
 * on the AMD EPYC machines here one die's are 80-130 ns, two dies' 410-500),
 * and far.
 *
 * The bytes a token reads count each expert stack's used share (its
 * expert_used_count of expert_count), and the token embedding only where it
 * is also the output head (a file without output.weight).
 */
#include <loom.h>

#include <omp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PLAIN_BYTES ((size_t)256 << 20)
#define STEPS_A_ROUND 8
#define ALIGN ((size_t)2 << 20)
#define MAX_PIECES 8192
#define ROUND_TRIPS 2000

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* What a round measured. */
typedef struct round_reading {
	double plain_gbs;     /* the higher plain reading */
	double tokens_per_s;  /* the decode's */
	double share;         /* the decode's bytes a second over plain_gbs */
	double pattern_share; /* the pattern reading over plain_gbs */
	double round_trip_ns; /* a cache line from the first thread to the last and back */
} round_reading;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median of the field at byte `field` of each of the first n rounds
 * (scratch: n doubles). */
static double median_of(const round_reading *r, int n, size_t field, double *scratch)
{
	for (int i = 0; i < n; i++)
		scratch[i] = *(const double *)((const char *)(r + i) + field);
	qsort(scratch, (size_t)n, sizeof(double), cmp_double);
	return scratch[n / 2];
}

static int nearer_first(const void *a, const void *b)
{
	double x = ((const round_reading *)a)->round_trip_ns, y = ((const round_reading *)b)->round_trip_ns;
	return x < y ? -1 : x > y;
}

/* 8 floats: one AVX register where the target has them. */
typedef float float8 __attribute__((vector_size(32)));

/* membw.c's loop in 32-byte loads: independent sums, a cache line's worth
 * each step; p on a line, n a multiple of 64. */
static float sum_floats(const float *p, size_t n)
{
	const float8 *v = (const float8 *)p;
	float8 s[8] = {{0}};

	for (size_t i = 0; i < n / 8; i += 8)
		for (int k = 0; k < 8; k++)
			s[k] += v[i + k];
	float8 all = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	float total = 0;
	for (int i = 0; i < 8; i++)
		total += all[i];
	return total;
}

/* Floats per thread's part of a piece of n floats: whole 64-float runs. */
static size_t part_floats(size_t n, int nth)
{
	return n / (size_t)nth / 64 * 64;
}

static volatile float sink;

/* GB/s of reading the pieces (floats each) one after another from p, each
 * shared among the threads, a barrier after each. */
static double read_pieces(const float *p, const size_t *pieces, int n_pieces, int nth)
{
	float s = 0;
	size_t read = 0;
	double t0 = now_s();
#pragma omp parallel num_threads(nth) reduction(+ : s)
	{
		const float *at = p;
		for (int i = 0; i < n_pieces; i++) {
			size_t part = part_floats(pieces[i], nth);
			s += sum_floats(at + part * (size_t)omp_get_thread_num(), part);
			at += pieces[i];
#pragma omp barrier
		}
	}
	double t = now_s() - t0;
	sink = s;
	for (int i = 0; i < n_pieces; i++)
		read += part_floats(pieces[i], nth) * (size_t)nth * sizeof(float);
	return (double)read / t / 1e9;
}

/* The plain reading: the threads each read their contiguous part of n
 * floats at p, as one piece. */
static double read_plain(const float *p, size_t n, int nth)
{
	return read_pieces(p, &n, 1, nth);
}

/* The integer value of the metadata key ending in suffix; 0 if none. */
static long meta_count(const loom_model *m, const char *suffix)
{
	size_t n = loom_model_meta_count(m), ls = strlen(suffix);

	for (size_t i = 0; i < n; i++) {
		const char *key = loom_model_meta_key(m, i);
		size_t lk = strlen(key);
		if (lk >= ls && strcmp(key + lk - ls, suffix) == 0) {
			char buf[64];
			loom_model_meta_value_str(m, i, buf, sizeof(buf));
			return strtol(buf, NULL, 10);
		}
	}
	return 0;
}

/* The bytes a token reads of each weight, in tensor order, as floats (the
 * pieces); returns their count, -1 if the model has more than cap
 * tensors; *bytes the total. */
static int token_pieces(const loom_model *m, size_t *pieces, int cap, double *bytes)
{
	long count = meta_count(m, ".expert_count"), used = meta_count(m, ".expert_used_count");
	size_t n = loom_model_tensor_count(m);
	bool has_output = false;
	int n_pieces = 0;
	loom_tensor_info info;

	if (n > (size_t)cap)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (loom_model_tensor_info(m, i, &info) == LOOM_OK && strcmp(info.name, "output.weight") == 0)
			has_output = true;
	*bytes = 0;
	for (size_t i = 0; i < n; i++) {
		if (loom_model_tensor_info(m, i, &info) != LOOM_OK)
			continue;
		if (strcmp(info.name, "token_embd.weight") == 0 && has_output)
			continue;
		double b = (double)info.n_bytes;
		if (strstr(info.name, "_exps.") != NULL && count > 0)
			b = b * (double)used / (double)count;
		*bytes += b;
		pieces[n_pieces++] = (size_t)b / sizeof(float);
	}
	return n_pieces;
}

/* `loom bench`'s draw of a token. */
static loom_token random_token(const loom_model *m, unsigned *state)
{
	*state = *state * 1103515245u + 12345u;
	return (loom_token)((*state >> 8) % (unsigned)loom_model_n_vocab(m));
}

static _Atomic long turn __attribute__((aligned(64)));

/* Nanoseconds a line takes from the first thread to the last and back:
 * each waits for the other's count and answers with the next. */
static double round_trip(int nth)
{
	double ns = 0;

	if (nth < 2)
		return 0;
	atomic_store(&turn, 0);
#pragma omp parallel num_threads(nth)
	{
		int id = omp_get_thread_num(), side = id == 0 ? 0 : id == nth - 1 ? 1 : -1;
		double t0 = now_s();
		for (long i = 0; side >= 0 && i < ROUND_TRIPS; i++) {
			long mine = 2 * i + side;
			while (atomic_load_explicit(&turn, memory_order_acquire) != mine)
				;
			atomic_store_explicit(&turn, mine + 1, memory_order_release);
		}
		if (id == 0)
			ns = (now_s() - t0) / ROUND_TRIPS * 1e9;
	}
	return ns;
}

static float *huge_floats(size_t n)
{
	size_t bytes = (n * sizeof(float) + ALIGN - 1) / ALIGN * ALIGN;
	float *p = aligned_alloc(ALIGN, bytes);

	if (p == NULL)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	for (size_t i = 0; i < bytes / sizeof(float); i++)
		p[i] = (float)(i & 1023) * 1e-3f;
	return p;
}

int main(int argc, char **argv)
{
	int threads = 0, rounds = 200, opt;
	double near_ns = 250;
	while ((opt = getopt(argc, argv, "t:r:x:")) != -1) {
		if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'x')
			near_ns = atof(optarg);
		else
			break;
	}
	if (optind != argc - 1 || rounds < 4) {
		fprintf(stderr, "usage: %s MODEL [-t THREADS] [-r ROUNDS (>= 4)] [-x NEAR_NS]\n", argv[0]);
		return 2;
	}
	const char *path = argv[optind];

	loom_runtime_params rp = loom_runtime_default_params();
	rp.n_threads = threads;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	loom_model_params mp;
	loom_model_params_init(&mp, sizeof(mp));
	loom_context_params cp = loom_context_default_params();
	cp.n_ctx = 64;
	if (loom_runtime_create(&rp, &rt) != LOOM_OK || loom_model_load(rt, path, &mp, &model) != LOOM_OK ||
	    loom_context_create(model, &cp, &ctx) != LOOM_OK) {
		fprintf(stderr, "%s: %s\n", path, loom_last_error());
		return 1;
	}
	const int nth = loom_runtime_n_threads(rt);

	size_t pieces[MAX_PIECES], pattern_floats = 0;
	double token_bytes;
	int n_pieces = token_pieces(model, pieces, MAX_PIECES, &token_bytes);
	if (n_pieces < 0) {
		fprintf(stderr, "%s: more than %d tensors\n", path, MAX_PIECES);
		return 1;
	}
	for (int i = 0; i < n_pieces; i++)
		pattern_floats += pieces[i];
	float *plain = huge_floats(PLAIN_BYTES / sizeof(float));
	float *pattern = huge_floats(pattern_floats);
	round_reading *rr = malloc(sizeof(round_reading) * (size_t)rounds);
	double *scratch = malloc(sizeof(double) * (size_t)rounds);
	if (plain == NULL || pattern == NULL || rr == NULL || scratch == NULL) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}

	/* Random tokens, as `loom bench` and llama-bench decode: one token
	 * again and again would choose the same experts every step, whose
	 * weights the caches might then keep. */
	unsigned rng = 1;
	loom_token token = 0;
	loom_batch batch = {.n_tokens = 1, .tokens = &token};
	for (int r = -2; r < rounds; r++) {
		double trip = round_trip(nth);
		double before = read_plain(plain, PLAIN_BYTES / sizeof(float), nth);
		double pieces_gbs = read_pieces(pattern, pieces, n_pieces, nth);
		loom_kv_clear(ctx);
		token = random_token(model, &rng);
		loom_status st = loom_decode(ctx, &batch);
		double step = 0;
		for (int i = 0; i < STEPS_A_ROUND && st == LOOM_OK; i++) {
			token = random_token(model, &rng);
			double t0 = now_s();
			st = loom_decode(ctx, &batch);
			step += (now_s() - t0) / STEPS_A_ROUND;
		}
		double after = read_plain(plain, PLAIN_BYTES / sizeof(float), nth);
		if (st != LOOM_OK) {
			fprintf(stderr, "decode: %s\n", loom_last_error());
			return 1;
		}
		if (r < 0) /* warm-up */
			continue;
		double bound = before > after ? before : after;
		rr[r] = (round_reading){.plain_gbs = bound,
					.tokens_per_s = 1.0 / step,
					.share = token_bytes / step / 1e9 / bound,
					.pattern_share = pieces_gbs / bound,
					.round_trip_ns = trip};
	}

	/* Nearest first: the near ones, then the far. */
	qsort(rr, (size_t)rounds, sizeof(round_reading), nearer_first);
	int n_near = 0;
	while (n_near < rounds && rr[n_near].round_trip_ns < near_ns)
		n_near++;
	const char *name = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
	for (int far = 0; far < 2; far++) {
		round_reading *group = rr + (far ? n_near : 0);
		int n = far ? rounds - n_near : n_near;
		if (n == 0)
			continue;
#define GROUP_MEDIAN(field) median_of(group, n, offsetof(round_reading, field), scratch)
		printf("| %s | %.1f | %s, %.0f ns | %d | %.2f | %.1f | %.0f%% | %.0f%% |\n", name, token_bytes / 1e6,
		       far ? "far" : "near", GROUP_MEDIAN(round_trip_ns), n, GROUP_MEDIAN(tokens_per_s),
		       GROUP_MEDIAN(plain_gbs), 100 * GROUP_MEDIAN(share), 100 * GROUP_MEDIAN(pattern_share));
#undef GROUP_MEDIAN
	}
	free(rr);
	free(scratch);
	free(plain);
	free(pattern);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return 0;
}
