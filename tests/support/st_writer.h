/*
 * st_writer.h - writes safetensors files and Hugging Face checkpoint
 * directories for tests.
 *
 *     static const float norm[3] = {1, 2, 3};
 *     static const float head[2][3] = {{1, 2, 3}, {4, 5, 6}};
 *     const st_tensor_spec t[] = {
 *             {"model.norm.weight", "F32", 1, {3}, norm},
 *             {"lm_head.weight", "F32", 2, {2, 3}, head},
 *     };
 *     st_write_file("<dir>/model.safetensors", t, 2);      (or st_write_sharded)
 *     st_write_config("<dir>", "{\"model_type\": \"llama\", \"hidden_size\": 3}");
 *
 * Shapes are row-major as PyTorch gives them, outermost first: loom's ne is
 * the reverse (lm_head.weight above has ne = {3, 2}). Files are laid out as
 * the safetensors library lays them out: the header padded with spaces to a
 * multiple of 8 bytes, tensors with wider elements first and no gaps, so
 * that every tensor's data is aligned to its element size.
 *
 * The writer checks only what it needs to lay a file out (a dtype whose
 * size it knows, 0..4 dimensions); it writes duplicate names and dtypes loom
 * refuses (U8, BOOL, ...) as asked. For other broken files write the header
 * text yourself with st_write_raw. Misuse and out-of-memory abort with a
 * message: this is test code.
 */
#ifndef LOOM_TEST_ST_WRITER_H
#define LOOM_TEST_ST_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct st_tensor_spec {
	const char *name;
	const char *dtype; /* as safetensors spells it: "F32", "F16", "BF16", "I64", ... */
	int n_dims;        /* 0 (a scalar) to 4 */
	int64_t shape[4];  /* outermost first */
	const void *data;  /* st_tensor_bytes() bytes; NULL writes zeros */
} st_tensor_spec;

/* Bytes per element of a safetensors dtype; 0 if the writer does not know
 * it (F4 and F6 types, which are not whole bytes, included). */
size_t st_dtype_size(const char *dtype);

/* Bytes of a tensor's data: the product of its shape times its element
 * size. */
uint64_t st_tensor_bytes(const st_tensor_spec *t);

/* Writes n tensors (n may be 0: the header is then "{}") to path, created
 * or truncated. The header carries "__metadata__": {"format": "pt"} as
 * PyTorch's files do. false if the file cannot be written. */
bool st_write_file(const char *path, const st_tensor_spec *t, int n);

/* The file name of shard i (0-based) of n_shards, as transformers names
 * them: "model-00001-of-00003.safetensors" for i = 0, n_shards = 3. */
void st_shard_name(char *buf, size_t size, int i, int n_shards);

/* Writes a checkpoint split over n_shards files in dir: tensors in order, in
 * n_shards runs of about equal count (shard i gets t[k] for the k with
 * k * n_shards / n == i), and "model.safetensors.index.json" mapping each
 * tensor to its shard. A shard given no tensors is written with none. */
bool st_write_sharded(const char *dir, const st_tensor_spec *t, int n, int n_shards);

/* Writes the 8-byte length of header, header padded with spaces to a
 * multiple of 8 bytes (as every writer does: the data then starts
 * 8-aligned), and data_size bytes of data (zeros if data is NULL). */
bool st_write_raw(const char *path, const char *header, const void *data, size_t data_size);

/* Writes json to "<dir>/config.json". */
bool st_write_config(const char *dir, const char *json);

#endif
