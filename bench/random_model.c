/*
 * random_model.c - a llama-architecture GGUF of a given shape with random
 * F16 weights, written straight to the file a tensor at a time, for speed
 * benchmarks of shapes too large for the numpy generator's minutes:
 *
 *   loom-bench-random-model SHAPE OUT.gguf
 *
 * SHAPE: llama2-7b (4096 wide, 32 layers, 11008 FFN, 32 heads, 32000
 * tokens) or tiny1b (TinyLlama-1.1B's: 2048, 22, 5632, 32 heads of which 4
 * kv). Matrices are N(0, 1/fan_in) (approximately: a sum of four uniforms),
 * the embedding N(0, 0.02^2), norms 1; each row's values come from its own
 * generator (tensor, row), so a file is a function of its shape alone,
 * whatever the thread count. The vocabulary is SentencePiece-like: <unk>,
 * <s>, </s>, the 256 byte tokens, then "▁tN" pieces of falling score,
 * which loom and llama.cpp both load. `loom quantize` makes the quantized
 * files from it (bench/cuda_device_check.sh bench 7b).
 */
#include "cpu_half.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

typedef struct shape {
	const char *name;
	uint32_t n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
	float rope_base, eps;
} shape;

static const shape shapes[] = {
	{"llama2-7b", 4096, 32, 11008, 32, 32, 32000, 4096, 10000.0f, 1e-5f},
	{"tiny1b", 2048, 22, 5632, 32, 4, 32000, 2048, 10000.0f, 1e-5f},
};

enum { GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9 };
enum { TYPE_F32 = 0, TYPE_F16 = 1 };
#define ALIGNMENT 32
#define MAX_TENSORS 512

typedef struct tensor {
	char name[64];
	uint32_t type;
	uint64_t ne[2];
	int n_dims;
	float sigma; /* 0: every value 1 (a norm) */
	uint64_t offset;
} tensor;

/* ---- the header, built in memory ---- */

typedef struct buf {
	unsigned char *p;
	size_t n, cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (b->p == NULL) {
			fprintf(stderr, "random_model: out of memory\n");
			exit(1);
		}
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

static void put_u32(buf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void put_u64(buf *b, uint64_t v)
{
	put(b, &v, 8);
}

static void put_str(buf *b, const char *s)
{
	put_u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void kv_u32(buf *b, const char *key, uint32_t v)
{
	put_str(b, key);
	put_u32(b, GGUF_U32);
	put_u32(b, v);
}

static void kv_f32(buf *b, const char *key, float v)
{
	put_str(b, key);
	put_u32(b, GGUF_F32);
	put(b, &v, 4);
}

static void kv_bool(buf *b, const char *key, int v)
{
	unsigned char c = (unsigned char)(v != 0);
	put_str(b, key);
	put_u32(b, GGUF_BOOL);
	put(b, &c, 1);
}

static void kv_str(buf *b, const char *key, const char *v)
{
	put_str(b, key);
	put_u32(b, GGUF_STRING);
	put_str(b, v);
}

/* The vocabulary's three arrays. */
static void kv_vocab(buf *b, uint32_t n)
{
	char piece[32];

	put_str(b, "tokenizer.ggml.tokens");
	put_u32(b, GGUF_ARRAY);
	put_u32(b, GGUF_STRING);
	put_u64(b, n);
	for (uint32_t i = 0; i < n; i++) {
		if (i < 3)
			put_str(b, (const char *[]){"<unk>", "<s>", "</s>"}[i]);
		else if (i < 3 + 256)
			snprintf(piece, sizeof(piece), "<0x%02X>", i - 3), put_str(b, piece);
		else
			snprintf(piece, sizeof(piece), "\xe2\x96\x81t%u", i), put_str(b, piece);
	}
	put_str(b, "tokenizer.ggml.scores");
	put_u32(b, GGUF_ARRAY);
	put_u32(b, GGUF_F32);
	put_u64(b, n);
	for (uint32_t i = 0; i < n; i++) {
		float score = i < 3 + 256 ? 0.0f : -(float)(i - 3 - 256);
		put(b, &score, 4);
	}
	put_str(b, "tokenizer.ggml.token_type");
	put_u32(b, GGUF_ARRAY);
	put_u32(b, GGUF_I32);
	put_u64(b, n);
	for (uint32_t i = 0; i < n; i++) {
		int32_t type = i == 0 ? 2 : i < 3 ? 3 : i < 3 + 256 ? 6 : 1; /* unknown, control, byte, normal */
		put(b, &type, 4);
	}
}

/* ---- the weights ---- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* About N(0, 1): four uniforms' sum, centred and scaled (Irwin-Hall). */
static float about_normal(uint64_t *s)
{
	uint64_t r = splitmix(s);
	float sum = 0.0f;
	for (int k = 0; k < 4; k++, r >>= 16)
		sum += (float)(r & 0xffff) / 65536.0f;
	return (sum - 2.0f) * 1.7320508f;
}

static size_t tensor_bytes(const tensor *t)
{
	return (size_t)t->ne[0] * (size_t)t->ne[1] * (t->type == TYPE_F16 ? 2 : 4);
}

/* Rows [r0, r1) of tensor ti into out. */
static void fill_rows(const tensor *t, int ti, uint64_t r0, uint64_t r1, unsigned char *out)
{
#pragma omp parallel for schedule(static)
	for (int64_t r = (int64_t)r0; r < (int64_t)r1; r++) {
		uint64_t s = (uint64_t)ti << 40 ^ (uint64_t)r;
		unsigned char *row = out + (size_t)(r - (int64_t)r0) * (size_t)t->ne[0] * (t->type == TYPE_F16 ? 2 : 4);
		for (uint64_t i = 0; i < t->ne[0]; i++) {
			float v = t->sigma > 0.0f ? t->sigma * about_normal(&s) : 1.0f;
			if (t->type == TYPE_F16) {
				uint16_t h = cpu_f32_to_fp16(v);
				memcpy(row + 2 * i, &h, 2);
			} else {
				memcpy(row + 4 * i, &v, 4);
			}
		}
	}
}

static int add_tensor(tensor *ts, int n, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1, float sigma)
{
	if (n == MAX_TENSORS) {
		fprintf(stderr, "random_model: too many tensors\n");
		exit(1);
	}
	tensor *t = &ts[n];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->type = type;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->n_dims = ne1 > 1 ? 2 : 1;
	t->sigma = sigma;
	return n + 1;
}

int main(int argc, char **argv)
{
	const shape *sh = NULL;

	for (size_t i = 0; argc == 3 && i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (strcmp(argv[1], shapes[i].name) == 0)
			sh = &shapes[i];
	if (sh == NULL) {
		fprintf(stderr, "usage: loom-bench-random-model llama2-7b|tiny1b OUT.gguf\n");
		return 2;
	}
	static tensor ts[MAX_TENSORS];
	int n = 0;
	const uint32_t E = sh->n_embd, F = sh->n_ff, kv = E / sh->n_head * sh->n_head_kv;
	char name[64];
	n = add_tensor(ts, n, "token_embd.weight", TYPE_F16, E, sh->n_vocab, 0.02f);
	for (uint32_t l = 0; l < sh->n_layer; l++) {
		const struct {
			const char *part;
			uint32_t type;
			uint64_t ne0, ne1;
		} parts[] = {
			{"attn_norm", TYPE_F32, E, 1}, {"attn_q", TYPE_F16, E, E},	   {"attn_k", TYPE_F16, E, kv},
			{"attn_v", TYPE_F16, E, kv},	 {"attn_output", TYPE_F16, E, E}, {"ffn_norm", TYPE_F32, E, 1},
			{"ffn_gate", TYPE_F16, E, F},	 {"ffn_up", TYPE_F16, E, F},	   {"ffn_down", TYPE_F16, F, E},
		};
		for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++) {
			snprintf(name, sizeof(name), "blk.%u.%s.weight", l, parts[p].part);
			float sigma = parts[p].type == TYPE_F32 ? 0.0f : 1.0f / sqrtf((float)parts[p].ne0);
			n = add_tensor(ts, n, name, parts[p].type, parts[p].ne0, parts[p].ne1, sigma);
		}
	}
	n = add_tensor(ts, n, "output_norm.weight", TYPE_F32, E, 1, 0.0f);
	n = add_tensor(ts, n, "output.weight", TYPE_F16, E, sh->n_vocab, 1.0f / sqrtf((float)E));

	buf h = {0};
	put(&h, "GGUF", 4);
	put_u32(&h, 3);
	put_u64(&h, (uint64_t)n);
	put_u64(&h, 19);
	kv_str(&h, "general.architecture", "llama");
	kv_str(&h, "general.name", sh->name);
	kv_u32(&h, "llama.context_length", sh->n_ctx);
	kv_u32(&h, "llama.embedding_length", E);
	kv_u32(&h, "llama.block_count", sh->n_layer);
	kv_u32(&h, "llama.feed_forward_length", F);
	kv_u32(&h, "llama.attention.head_count", sh->n_head);
	kv_u32(&h, "llama.attention.head_count_kv", sh->n_head_kv);
	kv_u32(&h, "llama.rope.dimension_count", E / sh->n_head);
	kv_f32(&h, "llama.rope.freq_base", sh->rope_base);
	kv_f32(&h, "llama.attention.layer_norm_rms_epsilon", sh->eps);
	kv_u32(&h, "general.file_type", 1);
	kv_str(&h, "tokenizer.ggml.model", "llama");
	kv_vocab(&h, sh->n_vocab);
	kv_u32(&h, "tokenizer.ggml.bos_token_id", 1);
	kv_u32(&h, "tokenizer.ggml.eos_token_id", 2);
	kv_bool(&h, "tokenizer.ggml.add_bos_token", 1);
	uint64_t at = 0;
	for (int i = 0; i < n; i++) {
		ts[i].offset = at;
		at += (tensor_bytes(&ts[i]) + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
		put_str(&h, ts[i].name);
		put_u32(&h, (uint32_t)ts[i].n_dims);
		for (int d = 0; d < ts[i].n_dims; d++)
			put_u64(&h, ts[i].ne[d]);
		put_u32(&h, ts[i].type);
		put_u64(&h, ts[i].offset);
	}
	static const unsigned char zeros[ALIGNMENT];
	put(&h, zeros, (ALIGNMENT - h.n % ALIGNMENT) % ALIGNMENT);

	FILE *f = fopen(argv[2], "wb");
	if (f == NULL || fwrite(h.p, 1, h.n, f) != h.n) {
		fprintf(stderr, "random_model: cannot write %s\n", argv[2]);
		return 1;
	}
	/* A tensor a piece of at most 64 MiB at a time. */
	const size_t piece = (size_t)64 << 20;
	unsigned char *data = malloc(piece);
	if (data == NULL) {
		fprintf(stderr, "random_model: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		size_t row = tensor_bytes(&ts[i]) / ts[i].ne[1], rows = piece / row;
		for (uint64_t r = 0; r < ts[i].ne[1]; r += rows) {
			uint64_t r1 = r + rows < ts[i].ne[1] ? r + rows : ts[i].ne[1];
			fill_rows(&ts[i], i, r, r1, data);
			size_t bytes = (size_t)(r1 - r) * row;
			if (fwrite(data, 1, bytes, f) != bytes) {
				fprintf(stderr, "random_model: cannot write %s\n", argv[2]);
				return 1;
			}
		}
		size_t pad = (ALIGNMENT - tensor_bytes(&ts[i]) % ALIGNMENT) % ALIGNMENT;
		if (pad > 0 && fwrite(zeros, 1, pad, f) != pad)
			return 1;
	}
	free(data);
	free(h.p);
	if (fclose(f) != 0) {
		fprintf(stderr, "random_model: cannot write %s\n", argv[2]);
		return 1;
	}
	printf("wrote %s: %s, %d tensors, %.2f GiB\n", argv[2], sh->name, n, (double)(h.n + at) / (1u << 30));
	return 0;
}
