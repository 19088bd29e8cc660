/*
 * loom.h - the public C API of the loom inference runtime.
 *
 * This is the only header a host application needs. Link with -lloom
 * (pkg-config: loom).
 *
 * Objects, outermost first:
 *   loom_runtime  plugins.yaml, plugin registry, chosen backend. One per
 *                 process is typical.
 *   loom_model    a loaded model file: weights, hyperparameters, vocabulary.
 *                 Immutable once loaded; may be shared by several contexts.
 *   loom_context  KV cache and scratch memory for one or more sequences.
 *   loom_sampler  turns a row of logits into a token.
 *
 * Conventions:
 *   - Every function that can fail returns a loom_status (LOOM_OK == 0, errors
 *     are negative). loom_last_error() then returns a message saying what and
 *     where; it is kept per thread and valid until the next failing call on
 *     that thread.
 *   - Every *_create / *_load has a *_free; *_free(NULL) does nothing.
 *   - Every *_params struct has a *_default_params() function; start from it.
 *   - Structs carry their size across the API, so that a program built
 *     against an older loom.h runs with a newer library of the same major
 *     version (docs/api.md, "The ABI"): a *_params struct in its first
 *     member, `size`, which *_default_params() sets; any other struct as
 *     an argument of the exported *_sized function, which the inline
 *     function of the usual name passes. A struct larger than the
 *     library's (a program built against a newer loom.h) is
 *     LOOM_ERR_INVALID_ARGUMENT, naming it, both sizes and the library's
 *     version.
 *   - Strings returned by the API are owned by the object they came from and
 *     live as long as it does, unless stated otherwise.
 *
 * Thread safety (see docs/api.md): a loom_runtime and a loom_model may be used
 * from several threads at once once created; a loom_context and a
 * loom_sampler must be used by one thread at a time.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_VERSION_MAJOR 1
#define LOOM_VERSION_MINOR 0
#define LOOM_VERSION_PATCH 0
#define LOOM_VERSION_HEX \
	((LOOM_VERSION_MAJOR << 16) | (LOOM_VERSION_MINOR << 8) | LOOM_VERSION_PATCH)

#if defined(__GNUC__)
#define LOOM_API __attribute__((visibility("default")))
#else
#define LOOM_API
#endif

/* Version of the library actually loaded, e.g. "1.0.0". */
LOOM_API const char *loom_version(void);
LOOM_API unsigned loom_version_hex(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */

#define LOOM_STATUS_MAP(X)                                                   \
	X(INVALID_ARGUMENT, -1, "invalid argument")                          \
	X(NO_MEMORY, -2, "out of memory")                                    \
	X(IO, -3, "input/output error")                                      \
	X(BAD_FORMAT, -4, "malformed model file")                            \
	X(UNSUPPORTED, -5, "unsupported feature")                            \
	X(NOT_FOUND, -6, "not found")                                        \
	X(CONFIG, -7, "configuration error")                                 \
	X(PLUGIN, -8, "plugin error")                                        \
	X(CONTRACT, -9, "architecture contract error")                       \
	X(CONTEXT_FULL, -10, "context window full")                          \
	X(BUFFER_TOO_SMALL, -11, "buffer too small")                         \
	X(BACKEND, -12, "backend failure")                                   \
	X(CANCELLED, -13, "cancelled")

typedef enum loom_status {
	LOOM_OK = 0,
#define LOOM_STATUS_ENUM_(name, code, text) LOOM_ERR_##name = code,
	LOOM_STATUS_MAP(LOOM_STATUS_ENUM_)
#undef LOOM_STATUS_ENUM_
} loom_status;

/* A fixed description of a status code ("out of memory"). */
LOOM_API const char *loom_strerror(loom_status status);

/* The message of the last failed call on this thread (never NULL). */
LOOM_API const char *loom_last_error(void);

/* ------------------------------------------------------------------------ */
/* Element types. The numbering is GGUF's (ggml_type), so a GGUF file's     */
/* tensor types map one to one.                                             */

typedef enum loom_dtype {
	LOOM_DTYPE_F32 = 0,
	LOOM_DTYPE_F16 = 1,
	LOOM_DTYPE_Q4_0 = 2,
	LOOM_DTYPE_Q4_1 = 3,
	LOOM_DTYPE_Q5_0 = 6,
	LOOM_DTYPE_Q5_1 = 7,
	LOOM_DTYPE_Q8_0 = 8,
	LOOM_DTYPE_Q8_1 = 9,
	LOOM_DTYPE_Q2_K = 10,
	LOOM_DTYPE_Q3_K = 11,
	LOOM_DTYPE_Q4_K = 12,
	LOOM_DTYPE_Q5_K = 13,
	LOOM_DTYPE_Q6_K = 14,
	LOOM_DTYPE_Q8_K = 15,
	LOOM_DTYPE_I8 = 24,
	LOOM_DTYPE_I16 = 25,
	LOOM_DTYPE_I32 = 26,
	LOOM_DTYPE_I64 = 27,
	LOOM_DTYPE_F64 = 28,
	LOOM_DTYPE_BF16 = 30,
	/* OCP microscaling FP4 (gpt-oss's experts): per 32 elements a power
	 * of two (E8M0) and 4-bit E2M1 values; read, not written, by loom. */
	LOOM_DTYPE_MXFP4 = 39,
	LOOM_DTYPE_COUNT = 40
} loom_dtype;

/* "q8_0", "f16", ...; NULL for a number that names no type. */
LOOM_API const char *loom_dtype_name(loom_dtype type);
/* Elements per block (1 for plain types) and bytes per block; 0 if unknown. */
LOOM_API int64_t loom_dtype_block_size(loom_dtype type);
LOOM_API size_t loom_dtype_block_bytes(loom_dtype type);

typedef int32_t loom_token;

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */

typedef enum loom_log_level {
	LOOM_LOG_ERROR = 0,
	LOOM_LOG_WARN = 1,
	LOOM_LOG_INFO = 2,
	LOOM_LOG_DEBUG = 3
} loom_log_level;

typedef void (*loom_log_fn)(void *user, loom_log_level level, const char *message);

/* ------------------------------------------------------------------------ */
/* Runtime: configuration and plugins                                       */

typedef struct loom_runtime loom_runtime;

/* Where a backend computes: in host memory (the CPU backends) or on a
 * device of its own (a GPU). */
typedef enum loom_compute_on {
	LOOM_COMPUTE_ANY = 0,
	LOOM_COMPUTE_HOST = 1,
	LOOM_COMPUTE_DEVICE = 2
} loom_compute_on;

typedef struct loom_runtime_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_runtime_default_params(), never by hand. */
	size_t size;
	/* plugins.yaml to read; NULL: $LOOM_PLUGINS, else the installed default. */
	const char *plugins_file;
	/* Backend to force by name; NULL: $LOOM_BACKEND, else plugins.yaml's policy. */
	const char *backend;
	/* A directory of architecture contracts searched first; then
	 * plugins.yaml's arch_path, then the installed share/loom/arch. NULL:
	 * none of its own. */
	const char *arch_dir;
	/* Compute threads; 0: the number of online CPUs. */
	int n_threads;
	/* Messages at or below this level reach log_fn (default LOOM_LOG_WARN). */
	loom_log_level log_level;
	/* Where messages go; NULL: standard error. */
	loom_log_fn log_fn;
	void *log_user;
	/* Only backends that compute there are candidates (default ANY); a
	 * forced backend that computes elsewhere is an error. */
	loom_compute_on compute_on;
} loom_runtime_params;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_runtime_params_init(loom_runtime_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_runtime_params loom_runtime_default_params(void)
{
	loom_runtime_params p;
	loom_runtime_params_init(&p, sizeof(p));
	return p;
}

/* Reads plugins.yaml, loads and probes every plugin, chooses the backend.
 * On failure *out is NULL. */
LOOM_API loom_status loom_runtime_create(const loom_runtime_params *params, loom_runtime **out);
LOOM_API void loom_runtime_free(loom_runtime *rt);

typedef enum loom_plugin_kind {
	LOOM_PLUGIN_BACKEND = 1,
	LOOM_PLUGIN_FORMAT = 2
} loom_plugin_kind;

/* What the registry knows of one plugin entry of plugins.yaml. */
typedef struct loom_plugin_info {
	const char *name;    /* from the plugin, or plugins.yaml if it never loaded */
	const char *path;    /* the file that was (or would have been) loaded */
	const char *version; /* NULL if it did not load */
	loom_plugin_kind kind;
	int score;           /* probe score; 0 = unusable here */
	bool loaded;         /* dlopen, ABI and vtable checks passed */
	bool chosen;         /* the backend in use (backends only) */
	const char *why;     /* why rejected, or why not chosen; "" if chosen */
} loom_plugin_info;

LOOM_API size_t loom_runtime_plugin_count(const loom_runtime *rt);
/* size: the bytes of *out (what the inline function passes). */
LOOM_API loom_status loom_runtime_plugin_info_sized(const loom_runtime *rt, size_t index, loom_plugin_info *out,
						    size_t size);
static inline loom_status loom_runtime_plugin_info(const loom_runtime *rt, size_t index, loom_plugin_info *out)
{
	return loom_runtime_plugin_info_sized(rt, index, out, sizeof(*out));
}
/* Name of the backend in use. */
LOOM_API const char *loom_runtime_backend_name(const loom_runtime *rt);

/* The device the backend in use computes on. */
typedef struct loom_device_info {
	char name[128];        /* e.g. "NVIDIA H100 80GB HBM3 (sm_90)" */
	uint64_t memory_total; /* bytes of device memory */
	uint64_t memory_free;  /* bytes free now */
} loom_device_info;

/* LOOM_ERR_UNSUPPORTED for a backend that computes in host memory (the CPU
 * backends), which has no device of its own to describe. */
LOOM_API loom_status loom_runtime_device_sized(const loom_runtime *rt, loom_device_info *out, size_t size);
static inline loom_status loom_runtime_device(const loom_runtime *rt, loom_device_info *out)
{
	return loom_runtime_device_sized(rt, out, sizeof(*out));
}
LOOM_API int loom_runtime_n_threads(const loom_runtime *rt);

/* ------------------------------------------------------------------------ */
/* Models                                                                   */

typedef struct loom_model loom_model;

typedef struct loom_model_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_model_default_params(), never by hand. */
	size_t size;
	/* Read only metadata and the vocabulary: no contract, no weights
	 * (enough for loom_tokenize and the metadata/tensor accessors). */
	bool vocab_only;
	/* Read only metadata and the tensor table (no vocabulary either): for
	 * inspecting any file of a known format. */
	bool metadata_only;
	/* Quantize the weights at load to this scheme ("q8_0", "q4_k_m", ...:
	 * loom_quantize's names), as `loom convert --type` would write them;
	 * NULL keeps the file's types. */
	const char *quantize;
} loom_model_params;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_model_params_init(loom_model_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_model_params loom_model_default_params(void)
{
	loom_model_params p;
	loom_model_params_init(&p, sizeof(p));
	return p;
}

/* Opens path with the best-scoring format plugin, validates it against its
 * architecture contract and makes the weights available to the backend.
 * The model keeps a reference to rt: free the model first. */
LOOM_API loom_status loom_model_load(loom_runtime *rt, const char *path,
				     const loom_model_params *params, loom_model **out);
LOOM_API void loom_model_free(loom_model *model);

LOOM_API const char *loom_model_architecture(const loom_model *model);
LOOM_API const char *loom_model_format(const loom_model *model); /* "gguf v3", ... */
LOOM_API int32_t loom_model_n_vocab(const loom_model *model);
LOOM_API int32_t loom_model_n_ctx_train(const loom_model *model);
LOOM_API int32_t loom_model_n_embd(const loom_model *model);
LOOM_API int32_t loom_model_n_layer(const loom_model *model);
/* Total bytes of all tensors in the file. */
LOOM_API uint64_t loom_model_size(const loom_model *model);
LOOM_API uint64_t loom_model_n_params(const loom_model *model);

/* Metadata, in file order. The value is rendered as text into buf (arrays
 * abbreviated); returns the bytes the full text needs. */
LOOM_API size_t loom_model_meta_count(const loom_model *model);
LOOM_API const char *loom_model_meta_key(const loom_model *model, size_t index);
LOOM_API size_t loom_model_meta_value_str(const loom_model *model, size_t index,
					  char *buf, size_t size);

typedef struct loom_tensor_info {
	const char *name;
	loom_dtype dtype;
	int n_dims;
	int64_t ne[4]; /* ne[0] is the contiguous dimension */
	uint64_t n_bytes;
	uint64_t file_offset; /* 0 where the format has no such notion */
} loom_tensor_info;

/* What the model at path is, as its contract and hyperparameters make it,
 * without reading its weights: the block's shape, RoPE, sliding windows,
 * soft-caps, sinks, multipliers and experts, a line each, into buf (size
 * bytes, NUL-terminated; *n_out the length the whole text needs). */
LOOM_API loom_status loom_model_describe_file(loom_runtime *rt, const char *path, char *buf, size_t size,
					      size_t *n_out);

LOOM_API size_t loom_model_tensor_count(const loom_model *model);
LOOM_API loom_status loom_model_tensor_info_sized(const loom_model *model, size_t index, loom_tensor_info *out,
						  size_t size);
static inline loom_status loom_model_tensor_info(const loom_model *model, size_t index, loom_tensor_info *out)
{
	return loom_model_tensor_info_sized(model, index, out, sizeof(*out));
}

/* ------------------------------------------------------------------------ */
/* Quantization                                                             */

/* Where a quantization stands, after each tensor. The library fills it
 * and hands it to the callback: size is its bytes in the library, and a
 * field past it is not there (a library older than the loom.h). */
typedef struct loom_convert_progress {
	size_t size;
	size_t index;         /* the tensor just done */
	size_t count;         /* of this many */
	const char *name;
	loom_dtype type;      /* the type it became */
	uint64_t bytes_done;  /* bytes of the input's tensors done so far */
	uint64_t bytes_total; /* of all of them */
} loom_convert_progress;

typedef void (*loom_progress_fn)(void *user, const loom_convert_progress *progress);

typedef struct loom_quantize_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_quantize_default_params(), never by hand. */
	size_t size;
	/* Scheme: "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q6_k", "q4_k_s",
	 * "q4_k_m", "q5_k_s", "q5_k_m", "f16" or "f32". The _m/_s
	 * mixes choose a type per tensor as llama-quantize does. */
	const char *scheme;
	/* Called after each tensor (may be NULL). */
	loom_progress_fn progress;
	void *progress_user;
} loom_quantize_params;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_quantize_params_init(loom_quantize_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_quantize_params loom_quantize_default_params(void)
{
	loom_quantize_params p;
	loom_quantize_params_init(&p, sizeof(p));
	return p;
}

/* Writes a copy of the model in_path with its weights converted to a
 * scheme, using the runtime's backend to quantize. The output has the
 * input's format (which must be writable). */
LOOM_API loom_status loom_quantize(loom_runtime *rt, const char *in_path, const char *out_path,
				   const loom_quantize_params *params);

typedef struct loom_convert_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_convert_default_params(), never by hand. */
	size_t size;
	/* A scheme of loom_quantize's ("f16", "q8_0", "q4_k_m", ...), or NULL
	 * to keep each weight's type. */
	const char *type;
	/* Called after each tensor is quantized (may be NULL). */
	loom_progress_fn progress;
	void *progress_user;
	/* Write the model (a GGUF file, with type NULL) with its weights in the
	 * runtime's backend's own layouts, so that loading it there uses the
	 * file in place instead of repacking it. Such a file runs only on that
	 * backend, at that version; elsewhere loading it is refused. */
	bool backend_layout;
} loom_convert_params;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_convert_params_init(loom_convert_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_convert_params loom_convert_default_params(void)
{
	loom_convert_params p;
	loom_convert_params_init(&p, sizeof(p));
	return p;
}

/* Writes the model at in_path (any format loom reads, such as a Hugging
 * Face safetensors directory) as a GGUF file of its contract's
 * architecture: GGUF metadata keys and tensor names, the tokenizer as
 * tokenizer.ggml.*, matrices and Q/K rows laid out as llama.cpp expects. */
LOOM_API loom_status loom_convert(loom_runtime *rt, const char *in_path, const char *out_path,
				  const loom_convert_params *params);

/* ------------------------------------------------------------------------ */
/* Vocabulary                                                               */

LOOM_API loom_token loom_token_bos(const loom_model *model); /* -1 if none */
LOOM_API loom_token loom_token_eos(const loom_model *model); /* -1 if none */
/* Whether tokenizing with add_special prepends BOS. */
LOOM_API bool loom_model_adds_bos(const loom_model *model);
/* True for tokens that end generation (EOS, EOT, ...). */
LOOM_API bool loom_token_is_eog(const loom_model *model, loom_token token);

/* Text to tokens. add_special: add BOS/EOS as the model's metadata asks.
 * parse_special: recognise control-token text such as "<s>" in the input.
 * On LOOM_ERR_BUFFER_TOO_SMALL *n_out is the number needed. */
LOOM_API loom_status loom_tokenize(const loom_model *model, const char *text, size_t text_len,
				   bool add_special, bool parse_special,
				   loom_token *out, size_t capacity, size_t *n_out);

/* The bytes a token stands for (not NUL-terminated; may be part of a UTF-8
 * sequence). special: render control tokens ("<s>") instead of nothing.
 * On LOOM_ERR_BUFFER_TOO_SMALL *n_out is the number needed. */
LOOM_API loom_status loom_token_to_piece(const loom_model *model, loom_token token, bool special,
					 char *buf, size_t size, size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Contexts and batches                                                     */

typedef struct loom_context loom_context;

typedef struct loom_context_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_context_default_params(), never by hand. */
	size_t size;
	uint32_t n_ctx;      /* KV cache cells; 0: the model's training context */
	uint32_t n_batch;    /* most tokens per loom_decode call (default 512) */
	loom_dtype kv_type;  /* LOOM_DTYPE_F16 (default), _F32, _Q8_0 or _Q4_0 */
} loom_context_params;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_context_params_init(loom_context_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_context_params loom_context_default_params(void)
{
	loom_context_params p;
	loom_context_params_init(&p, sizeof(p));
	return p;
}

/* LOOM_ERR_UNSUPPORTED, naming the op, if the backend cannot run a node of
 * the context's steps (an op, or the KV cache's type). */
LOOM_API loom_status loom_context_create(loom_model *model, const loom_context_params *params,
					 loom_context **out);
LOOM_API void loom_context_free(loom_context *ctx);

/* Asked before each step the context runs (each n_batch piece of a long
 * prompt, each generated token); returning true cancels the work with
 * LOOM_ERR_CANCELLED, the cache left as the finished steps left it. A
 * server sets one to drop a request whose client has gone. fn NULL
 * removes it. */
typedef bool (*loom_abort_fn)(void *user);
LOOM_API void loom_context_set_abort(loom_context *ctx, loom_abort_fn fn, void *user);
LOOM_API uint32_t loom_context_n_ctx(const loom_context *ctx);
/* The most tokens a loom_decode takes (n_batch as the context made it). */
LOOM_API uint32_t loom_context_n_batch(const loom_context *ctx);
LOOM_API const loom_model *loom_context_model(const loom_context *ctx);

/* Sequence ids run from 0 to LOOM_MAX_SEQ - 1. */
#define LOOM_MAX_SEQ 256

/* Tokens to evaluate together. Token i belongs to sequence seq_id[i] at
 * position pos[i]; it attends to the cached tokens of its own sequence at
 * positions <= pos[i]. Sequences share the cache. logits[i] != 0 asks for
 * that token's logits. seq_id NULL means all 0; pos NULL means each token
 * follows the last cached (or earlier batch) position of its sequence;
 * logits NULL means only the last token's. */
typedef struct loom_batch {
	int32_t n_tokens;
	const loom_token *tokens;
	const int32_t *pos;
	const int32_t *seq_id;
	const int8_t *logits;
} loom_batch;

/* Runs the model on a batch (at most n_batch tokens) and stores its keys and
 * values in the cache. LOOM_ERR_CONTEXT_FULL if the cache has no room. */
LOOM_API loom_status loom_decode_sized(loom_context *ctx, const loom_batch *batch, size_t size);
static inline loom_status loom_decode(loom_context *ctx, const loom_batch *batch)
{
	return loom_decode_sized(ctx, batch, sizeof(*batch));
}

/* Logits (n_vocab floats) of token i of the last batch; NULL unless that
 * token asked for them. Valid until the next loom_decode. */
LOOM_API const float *loom_get_logits(loom_context *ctx, int32_t i);

/* Drops sequence seq_id's cache entries with p0 <= pos < p1 (p1 < 0: to the
 * end; seq_id < 0: every sequence). A cell shared with other sequences
 * stays theirs. */
LOOM_API loom_status loom_kv_seq_remove(loom_context *ctx, int32_t seq_id, int32_t p0, int32_t p1);
/* dst's entries at positions [p0, p1) (p1 < 0: to the end) are dropped and
 * src's there become dst's too: the cells are shared, not copied, so a
 * prompt prefix evaluated once serves several sequences. */
LOOM_API loom_status loom_kv_seq_copy(loom_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1);
/* Drops every sequence but seq_id. */
LOOM_API loom_status loom_kv_seq_keep(loom_context *ctx, int32_t seq_id);
/* Moves seq_id's entries at positions [p0, p1) (p1 < 0: to the end) by
 * delta, turning their keys to match (RoPE models only:
 * LOOM_ERR_UNSUPPORTED otherwise); entries that would move before position
 * 0 are dropped. A chat dropping its oldest turns keeps the rest without
 * evaluating it again. A cell shared with other sequences moves for them
 * too. */
LOOM_API loom_status loom_kv_seq_shift(loom_context *ctx, int32_t seq_id, int32_t p0, int32_t p1, int32_t delta);

/* A sequence's cache entries as bytes (positions, keys and values), to
 * restore later into a context of the same model and cache type: a chat
 * parked while others run, or moved to another context. state_size gives
 * the bytes save writes; save writes them (LOOM_ERR_BUFFER_TOO_SMALL, with
 * *written the size needed, if size is less). load drops seq_id's entries,
 * then restores the state as seq_id in free cells (LOOM_ERR_CONTEXT_FULL
 * if too few are free; LOOM_ERR_BAD_FORMAT, naming the mismatch, for bytes
 * that are not a state this context can take). */
LOOM_API loom_status loom_kv_seq_state_size(const loom_context *ctx, int32_t seq_id, size_t *size);
LOOM_API loom_status loom_kv_seq_save(loom_context *ctx, int32_t seq_id, void *buf, size_t size, size_t *written);
LOOM_API loom_status loom_kv_seq_load(loom_context *ctx, int32_t seq_id, const void *buf, size_t size);
LOOM_API void loom_kv_clear(loom_context *ctx);
/* Largest cached position of seq_id, -1 if it has none. */
LOOM_API int32_t loom_kv_seq_pos_max(const loom_context *ctx, int32_t seq_id);
/* The earliest position seq_id can be cut back to and continued from:
 * after loom_kv_seq_remove(ctx, seq_id, p, -1), a decode at p sees all its
 * context for any p at or past it. 0 for a model without windowed layers;
 * with them the windowed layers' cache drops what their windows no longer
 * see (keeping a few dozen positions more), and a sequence cut back
 * further must be decoded again from 0 (loom_decode refuses it, naming the
 * sequence). A server reusing a cached prefix asks this first. */
LOOM_API int32_t loom_kv_seq_resume_min(const loom_context *ctx, int32_t seq_id);
/* Cells in use. */
LOOM_API uint32_t loom_kv_used(const loom_context *ctx);

/* Where a context's steps spend their time, summed over the loom_decode
 * calls made since profiling was turned on (loom bench -v prints it). */
typedef struct loom_profile {
	int64_t n_steps;     /* loom_decode calls counted */
	double total_ms;     /* their wall time */
	double matmul_ms;    /* products with weight matrices (experts' too), but the output head's */
	double head_ms;      /* the output head: the rows asked about, hidden state to logits */
	double attention_ms;
	double other_ms;     /* norms, RoPE, activations, KV cache stores, embedding rows */
	double host_ms;      /* the rest: the core's own work (the graph, inputs, logits read back and checked) */
	/* Whether the backend timed each of its nodes; if not, the four kinds
	 * above are 0 and host_ms is what was not the backend's compute. */
	bool by_node;
} loom_profile;

/* on: every loom_decode from now adds to the context's profile, which
 * starts from zero; off: none does. Profiling costs a clock reading per
 * node. */
LOOM_API void loom_context_set_profiling(loom_context *ctx, bool on);
LOOM_API loom_status loom_context_profile_sized(const loom_context *ctx, loom_profile *out, size_t size);
static inline loom_status loom_context_profile(const loom_context *ctx, loom_profile *out)
{
	return loom_context_profile_sized(ctx, out, sizeof(*out));
}

/* ------------------------------------------------------------------------ */
/* Sampling                                                                 */

typedef struct loom_sampler loom_sampler;

typedef struct loom_sampler_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_sampler_default_params(), never by hand. */
	size_t size;
	float temperature;     /* <= 0: greedy (default 0.8) */
	int32_t top_k;         /* <= 0: off (default 40) */
	float top_p;           /* >= 1: off (default 0.95) */
	float min_p;           /* <= 0: off (default 0.05) */
	float repeat_penalty;  /* 1: off (default 1.0) */
	int32_t repeat_last_n; /* tokens the penalties look back over; 0: no penalty (default 64) */
	uint64_t seed;         /* same seed, same choices */
	/* OpenAI's penalties, over the same last repeat_last_n tokens: a token
	 * seen count times there loses count * frequency_penalty +
	 * presence_penalty from its logit (count > 0), after the repeat
	 * penalty. Each in [-2, 2]; 0: off (default). */
	float presence_penalty;
	float frequency_penalty;
} loom_sampler_params;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_sampler_params_init(loom_sampler_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_sampler_params loom_sampler_default_params(void)
{
	loom_sampler_params p;
	loom_sampler_params_init(&p, sizeof(p));
	return p;
}
LOOM_API loom_status loom_sampler_create(const loom_sampler_params *params, loom_sampler **out);
LOOM_API void loom_sampler_free(loom_sampler *s);
/* Picks a token from n_vocab logits (not modified); -1 when there is
 * nothing to pick (every logit -inf or NaN; or, at a temperature, one is
 * +inf) or memory ran out, with loom_last_error saying which. Costs a few passes over the row,
 * whatever the vocabulary: nothing is sorted but top-k's candidates. */
LOOM_API loom_token loom_sampler_sample(loom_sampler *s, const float *logits, int32_t n_vocab);
/* bias[i] is added to token tokens[i]'s logit before every draw, after
 * the penalties (OpenAI's logit_bias; -100 all but bans a token); tokens
 * past the row are left alone. Copied; n 0: none. */
LOOM_API loom_status loom_sampler_set_logit_bias(loom_sampler *s, const loom_token *tokens, const float *bias,
						 size_t n);
/* Records a token in the history the penalties look at; with a grammar,
 * the token just sampled also moves the grammar on. */
LOOM_API void loom_sampler_accept(loom_sampler *s, loom_token token);
/* The history forgotten and the seed's draws started again; a grammar
 * back at its start. */
LOOM_API void loom_sampler_reset(loom_sampler *s);

/* ------------------------------------------------------------------------ */
/* Grammars                                                                 */

/* A context-free grammar that generation follows: compiled once,
 * immutable, shared by any number of samplers (which keep a pointer to it:
 * free it after them). */
typedef struct loom_grammar loom_grammar;

/* Compiles llama.cpp's GBNF text (rules `name ::= alternatives`, string
 * literals, character classes, ".", groups, * + ? {m,n}; docs/api.md);
 * root names the start rule (NULL: "root"). LOOM_ERR_INVALID_ARGUMENT,
 * naming the line and column, for a syntax error, an undefined rule, left
 * recursion or a grammar past the limits. */
LOOM_API loom_status loom_grammar_parse(const char *text, size_t len, const char *root, loom_grammar **out);
/* The JSON texts a JSON Schema accepts, as a grammar: properties in the
 * schema's order and none it does not name, whitespace bounded, numbers of
 * at most 16 digits: a narrower set than the schema's, never a wider one.
 * Read: type (and lists of types), properties, required,
 * additionalProperties, enum, const, items, prefixItems, minItems,
 * maxItems, anyOf, oneOf (branches of distinct types or consts), local
 * $ref with $defs or definitions, minLength, maxLength, pattern (ECMA
 * syntax without lookarounds or backreferences; classes leave out the
 * quote, the backslash and control characters), format (date,
 * time, date-time, uuid, email), an integer's minimum, maximum and their
 * exclusive forms, a number's bounds (rounded inward to whole numbers,
 * fractions written between them; then without an
 * exponent); annotations
 * (title, description, default, examples, ...) are read past. Any other
 * keyword is LOOM_ERR_INVALID_ARGUMENT naming it and where it is: loom
 * refuses what it cannot enforce rather than ignore it. */
LOOM_API loom_status loom_grammar_from_json_schema(const char *json, size_t len, loom_grammar **out);
LOOM_API void loom_grammar_free(loom_grammar *g);

/* From now on s samples only tokens whose bytes continue a sentence of g
 * (from its start), and an end-of-generation token only where a sentence
 * may end; g NULL: no grammar. The token drawn is checked first, and only
 * if g refuses it is the draw repeated among the tokens g allows (with
 * top-k or top-p this differs slightly from masking first: the rules cut
 * the unmasked row). A sample with nothing the grammar allows is -1, with
 * loom_last_error saying why. model: the model whose tokens s samples. */
LOOM_API loom_status loom_sampler_set_grammar(loom_sampler *s, const loom_model *model, const loom_grammar *g);

/* ------------------------------------------------------------------------ */
/* Embeddings                                                               */

/* The embedding of a text's tokens: the model's last hidden state (the
 * output of its final norm) at every token, averaged over the tokens and
 * scaled to unit L2 norm, into out[0 .. n_embd). The tokens are evaluated
 * as sequence seq_id in n_batch pieces, with causal attention; that
 * sequence's cells are cleared before and after, and other sequences are
 * left as they are. n_dims must be loom_model_n_embd. */
LOOM_API loom_status loom_embed(loom_context *ctx, int32_t seq_id, const loom_token *tokens, size_t n_tokens,
				float *out, size_t n_dims);

/* ------------------------------------------------------------------------ */
/* Generation                                                               */

/* Called once per generated token with the text it adds (may be empty while a
 * UTF-8 sequence or a possible stop string is incomplete). Return false to
 * stop. */
typedef bool (*loom_token_fn)(void *user, loom_token token, const char *text, size_t len);

typedef enum loom_stop_reason {
	LOOM_STOP_LENGTH = 0,   /* n_predict tokens generated */
	LOOM_STOP_EOG = 1,      /* an end-of-generation token */
	LOOM_STOP_STRING = 2,   /* a stop string appeared */
	LOOM_STOP_CALLBACK = 3, /* the callback returned false */
	LOOM_STOP_CONTEXT = 4   /* the context is full */
} loom_stop_reason;

typedef struct loom_generate_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_generate_default_params(), never by hand. */
	size_t size;
	int32_t n_predict;           /* most tokens to generate; < 0: until the context is full */
	/* How tokens are drawn (read during the call); NULL: the defaults.
	 * A pointer, not a member, so that each struct grows alone. */
	const loom_sampler_params *sampling;
	const char *const *stop;     /* stop strings (not printed) */
	size_t n_stop;
	int32_t seq_id;              /* sequence to use; its cache is cleared first... */
	bool keep_cache;             /* ...unless this is set: the prompt then continues what the
				      * sequence holds (a chat's next turn) */
	bool add_special;            /* BOS as the model asks (default true) */
	bool parse_special;          /* special tokens' text in the prompt becomes those tokens
				      * (chat template markers; default false) */
	bool ignore_eos;             /* end-of-generation tokens are never sampled (default false) */
	/* When the context is full, shift it as llama.cpp does instead of
	 * stopping: the first n_keep positions stay, half of what follows them
	 * is dropped and the rest moves down (RoPE models; default false). A
	 * prompt that would not fit after what keep_cache keeps is made room
	 * for the same way. */
	bool context_shift;
	int32_t n_keep;
	/* The generated text follows this grammar (loom_sampler_set_grammar;
	 * kept by the caller until the call returns); NULL: none (default). */
	const loom_grammar *grammar;
} loom_generate_params;

typedef struct loom_generate_stats {
	int32_t n_prompt;
	int32_t n_generated;
	double prompt_ms;
	double generate_ms;
	loom_stop_reason stop_reason;
	int32_t n_shifts;    /* context shifts made */
	int32_t n_discarded; /* tokens they dropped, at positions n_keep.. of the sequence */
} loom_generate_stats;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_generate_params_init(loom_generate_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_generate_params loom_generate_default_params(void)
{
	loom_generate_params p;
	loom_generate_params_init(&p, sizeof(p));
	return p;
}

/* Tokenizes prompt, evaluates it as one batch (or n_batch pieces), then
 * samples one token at a time, passing each to on_token. stats may be NULL. */
LOOM_API loom_status loom_generate_sized(loom_context *ctx, const char *prompt, const loom_generate_params *params,
					 loom_token_fn on_token, void *user, loom_generate_stats *stats,
					 size_t stats_size);
static inline loom_status loom_generate(loom_context *ctx, const char *prompt, const loom_generate_params *params,
					loom_token_fn on_token, void *user, loom_generate_stats *stats)
{
	return loom_generate_sized(ctx, prompt, params, on_token, user, stats, sizeof(*stats));
}

/* loom_generate with a prompt already tokenized (n_prompt > 0, else
 * LOOM_ERR_INVALID_ARGUMENT; add_special and parse_special are not used).
 * With keep_cache the tokens continue what seq_id holds, from
 * loom_kv_seq_pos_max + 1: a chat that matched its cache by tokens drops
 * the rest (loom_kv_seq_remove) and passes what differs. */
LOOM_API loom_status loom_generate_tokens_sized(loom_context *ctx, const loom_token *prompt, size_t n_prompt,
						const loom_generate_params *params, loom_token_fn on_token, void *user,
						loom_generate_stats *stats, size_t stats_size);
static inline loom_status loom_generate_tokens(loom_context *ctx, const loom_token *prompt, size_t n_prompt,
					       const loom_generate_params *params, loom_token_fn on_token, void *user,
					       loom_generate_stats *stats)
{
	return loom_generate_tokens_sized(ctx, prompt, n_prompt, params, on_token, user, stats, sizeof(*stats));
}

/* ------------------------------------------------------------------------ */
/* Streaming detokenization                                                 */

/* Turns generated tokens, one at a time, into text that is safe to show as
 * it comes: whole UTF-8 characters only, and no text that could start a
 * stop string until it is known not to (a stop string itself is never
 * shown). loom_generate uses it; a host running its own loop (a server)
 * keeps one per stream. */
typedef struct loom_detokenizer loom_detokenizer;

/* stop: n_stop NUL-terminated strings, copied (empty ones are ignored). */
LOOM_API loom_status loom_detokenizer_create(const loom_model *model, const char *const *stop, size_t n_stop,
					     loom_detokenizer **out);
LOOM_API void loom_detokenizer_free(loom_detokenizer *d);

/* Adds token's text. *text and *len get what may be shown now (valid until
 * the next call on d). With last set, nothing more will come, so nothing
 * is held back. *stopped (may be NULL) becomes true when a stop string is
 * complete: the text before it is given and every later push gives
 * nothing. */
LOOM_API loom_status loom_detokenizer_push(loom_detokenizer *d, loom_token token, bool last, const char **text,
					   size_t *len, bool *stopped);

/* Everything still held back, when generation ends without a token to add
 * (an end-of-generation token). */
LOOM_API loom_status loom_detokenizer_finish(loom_detokenizer *d, const char **text, size_t *len);

/* ------------------------------------------------------------------------ */
/* The token step                                                           */

/* One generated sequence's step from a row of logits to a token and its
 * text: it samples (with a loom_sampler of its own), records the token for
 * the penalties, decides whether generation ends there (an end-of-
 * generation token, a stop string, the length, or the caller's last step)
 * and turns the tokens into text that is safe to show (with a
 * loom_detokenizer of its own). loom_generate runs one; a host that runs
 * its own decode loop, such as a server batching many sequences into each
 * loom_decode, keeps one per sequence. A generator is used by one thread at
 * a time; generators of one model may step on several threads at once. */
typedef struct loom_generator loom_generator;

#define LOOM_MAX_TOP_LOGPROBS 20

typedef struct loom_generator_params {
	/* The struct's bytes in the loom.h compiled against: set by
	 * loom_generator_default_params(), never by hand. */
	size_t size;
	/* How tokens are drawn (copied); NULL: the defaults. */
	const loom_sampler_params *sampling;
	int32_t n_predict;        /* most tokens to generate; < 0: no limit (default) */
	const char *const *stop;  /* stop strings (copied; never shown) */
	size_t n_stop;
	bool ignore_eos;          /* end-of-generation tokens are never sampled (default false) */
	/* -1: no log-probabilities (default); 0 to LOOM_MAX_TOP_LOGPROBS: each
	 * token's, and that many of the most likely tokens' with theirs. */
	int32_t n_logprobs;
} loom_generator_params;

/* What one step gives. */
typedef struct loom_generated {
	loom_token token;
	const char *text;              /* what may be shown now (may be empty); valid until the next step */
	size_t len;
	bool done;                     /* generation ends with this token */
	loom_stop_reason stop_reason;  /* why, when done */
	/* With n_logprobs >= 0: the token's log-probability under the logits
	 * as the model gave them (before penalties and the sampling rules),
	 * and the n_top most likely tokens with theirs, most likely first
	 * (ties: the lower id first). */
	float logprob;
	int32_t n_top;
	loom_token top[LOOM_MAX_TOP_LOGPROBS];
	float top_logprob[LOOM_MAX_TOP_LOGPROBS];
} loom_generated;

/* Fills the first size bytes of p with the defaults (at most this
 * library's struct; the rest zero) and sets p->size. */
LOOM_API loom_status loom_generator_params_init(loom_generator_params *p, size_t size);
/* The defaults, at the size of the struct in the loom.h compiled against. */
static inline loom_generator_params loom_generator_default_params(void)
{
	loom_generator_params p;
	loom_generator_params_init(&p, sizeof(p));
	return p;
}
LOOM_API loom_status loom_generator_create(const loom_model *model, const loom_generator_params *params,
					   loom_generator **out);
LOOM_API void loom_generator_free(loom_generator *g);

/* Records tokens that came before generation (the prompt) in the history
 * the penalties look back over. */
LOOM_API void loom_generator_accept(loom_generator *g, const loom_token *tokens, size_t n);

/* The next token from a row of logits (loom_model_n_vocab floats, not
 * modified). last: the caller evaluates no token after this one (its
 * context is full), so no text is held back and the step is done, with
 * LOOM_STOP_CONTEXT unless it ends for another reason first (an
 * end-of-generation token, then a stop string). After a step that is done,
 * the generator takes no more (LOOM_ERR_INVALID_ARGUMENT). A row with
 * nothing to sample (every logit -inf or NaN) is LOOM_ERR_INVALID_ARGUMENT. */
LOOM_API loom_status loom_generator_next_sized(loom_generator *g, const float *logits, bool last, loom_generated *out,
					       size_t size);
static inline loom_status loom_generator_next(loom_generator *g, const float *logits, bool last, loom_generated *out)
{
	return loom_generator_next_sized(g, logits, last, out, sizeof(*out));
}

/* Tokens generated so far. */
LOOM_API int32_t loom_generator_n_generated(const loom_generator *g);

/* loom_sampler_set_logit_bias for the generator's sampler. */
LOOM_API loom_status loom_generator_set_logit_bias(loom_generator *g, const loom_token *tokens, const float *bias,
						   size_t n);
/* The generator's tokens follow grammar (loom_sampler_set_grammar) from
 * its next step; NULL: none. The grammar starts with what the generator
 * samples: a prompt's tokens (loom_generator_accept) do not move it. */
LOOM_API loom_status loom_generator_set_grammar(loom_generator *g, const loom_grammar *grammar);

/* ------------------------------------------------------------------------ */
/* A reply's parts                                                          */

/* Splits a chat model's reply, step by step, into what its user reads (the
 * content) and its reasoning, by the markers of its chat template. In the
 * harmony format (gpt-oss) the reply is a run of messages, each on a
 * channel: the final channel is the content; analysis, and commentary (its
 * preambles and tool calls), are reasoning; the headers that name them are
 * neither. For templates without channels the content is the step's text
 * as the generator gave it. A host keeps one per reply, beside its
 * generator, and pushes every step into it. */
typedef struct loom_reply_reader loom_reply_reader;

/* template_name: as loom_chat_apply's (NULL: the model's own). stop: the
 * generator's stop strings, held back from each part as the generator
 * holds them back from its text. */
LOOM_API loom_status loom_reply_reader_create(const loom_model *model, const char *template_name,
					      const char *const *stop, size_t n_stop, loom_reply_reader **out);
LOOM_API void loom_reply_reader_free(loom_reply_reader *r);

/* What one step adds to each part (either may be empty); valid until the
 * next push. */
typedef struct loom_reply_parts {
	const char *content;
	size_t n_content;
	const char *reasoning;
	size_t n_reasoning;
} loom_reply_parts;

/* Adds a generator step (its token, text and whether it was the last). A
 * host whose loop does not know which step is the last (a loom_token_fn)
 * ends the reply with a step of token -1, no text, done set: what was held
 * back comes then. */
LOOM_API loom_status loom_reply_reader_push_sized(loom_reply_reader *r, const loom_generated *step, size_t step_size,
						  loom_reply_parts *out, size_t size);
static inline loom_status loom_reply_reader_push(loom_reply_reader *r, const loom_generated *step,
						 loom_reply_parts *out)
{
	return loom_reply_reader_push_sized(r, step, sizeof(*step), out, sizeof(*out));
}

/* ------------------------------------------------------------------------ */
/* Chat templates                                                           */

/* One turn of a conversation: role "system" (first only), "user" or
 * "assistant". */
typedef struct loom_chat_message {
	const char *role;
	const char *content;
} loom_chat_message;

/* Formats messages as the prompt text of a chat model, ending with the
 * assistant's opening when add_assistant. template_name: "chatml",
 * "llama2", "llama3", "mistral", "zephyr", "phi3", "gemma", "harmony",
 * "mistral-v7", "mistral-v11", "mistral-v13" (Mistral's later tokenizers),
 * "glm4", "granite", "command-r7b", "tulu", "dots1" or "plain"; NULL for the model's own (loom_chat_template), with what its
 * template adds to the family's turns where loom knows it (docs/api.md:
 * Qwen 2.5's default system message, Llama 3.1's dated system block, ...).
 * The text holds no BOS (the
 * tokenizer adds it) and is meant to be tokenized with special tokens
 * parsed. Writes a NUL-terminated string; *n_out gets its length, also when
 * the buffer is too small (LOOM_ERR_BUFFER_TOO_SMALL). */
LOOM_API loom_status loom_chat_apply_sized(const loom_model *model, const char *template_name,
					   const loom_chat_message *messages, size_t n_messages, size_t message_size,
					   bool add_assistant, char *buf, size_t size, size_t *n_out);
static inline loom_status loom_chat_apply(const loom_model *model, const char *template_name,
					  const loom_chat_message *messages, size_t n_messages, bool add_assistant,
					  char *buf, size_t size, size_t *n_out)
{
	return loom_chat_apply_sized(model, template_name, messages, n_messages, sizeof(*messages), add_assistant, buf,
				     size, n_out);
}

/* The name of the template loom_chat_apply uses for this model: the one its
 * GGUF tokenizer.chat_template is recognised as, else its contract's
 * chat_template, else "plain" (logged as a warning when the file's template
 * was not recognised). */
LOOM_API const char *loom_chat_template(const loom_model *model);

/* ------------------------------------------------------------------------ */
/* Tools                                                                    */

/* Formats a conversation given as the OpenAI chat API's JSON: messages an
 * array of {role, content, tool_calls, tool_call_id} (roles system or
 * developer, user, assistant, tool; content a string, text parts or null;
 * tool_calls [{id, type, function: {name, arguments}}], arguments JSON
 * text or an object), tools its `tools` array ({type: "function",
 * function: {name, description, parameters}}; NULL or tools_len 0: none).
 * Each template family writes the tools, the calls and their results as
 * its models were trained to (docs/serving.md lists the formats); a
 * family without a tool format of its own gets loom's generic one, which
 * asks for the whole reply as a JSON object. Otherwise as
 * loom_chat_apply. */
LOOM_API loom_status loom_chat_apply_json(const loom_model *model, const char *template_name, const char *messages_json,
					  size_t messages_len, const char *tools_json, size_t tools_len, bool add_assistant,
					  char *buf, size_t size, size_t *n_out);

/* How much a reasoning model reasons before it answers, as a request asks
 * for it (OpenAI's reasoning_effort; Qwen 3's enable_thinking). Each
 * template family offers what its models were trained on: harmony (gpt-oss)
 * the levels low, medium and high, written into its system message (ON and
 * the default: medium; NONE refused: gpt-oss always reasons); a template
 * that switches thinking off (Qwen 3's enable_thinking) off with NONE and on
 * with the others; a template that opens every reply in <think> (Qwen 3's
 * thinking-only releases) reasoning, NONE refused; every other template
 * none, ON and the levels refused. */
typedef enum loom_reasoning {
	LOOM_REASONING_DEFAULT = 0, /* what the template does when told nothing */
	LOOM_REASONING_NONE,        /* no reasoning */
	LOOM_REASONING_ON,          /* reasoning, at the template's own level */
	LOOM_REASONING_LOW,
	LOOM_REASONING_MEDIUM,
	LOOM_REASONING_HIGH,
} loom_reasoning;

/* Whether the template (NULL: the model's own) offers reasoning: LOOM_OK,
 * or LOOM_ERR_INVALID_ARGUMENT with loom_last_error() saying what it
 * offers. */
LOOM_API loom_status loom_chat_check_reasoning(const loom_model *model, const char *template_name,
					       loom_reasoning reasoning);

/* loom_chat_apply_json with the reasoning asked for, refused as
 * loom_chat_check_reasoning refuses. */
LOOM_API loom_status loom_chat_apply_json_reasoning(const loom_model *model, const char *template_name,
						    loom_reasoning reasoning, const char *messages_json,
						    size_t messages_len, const char *tools_json, size_t tools_len,
						    bool add_assistant, char *buf, size_t size, size_t *n_out);

/* A tool call in a reply, as loom_reply_reader reads it. */
typedef struct loom_tool_call {
	const char *name;      /* the function's name; "" until it is read whole */
	const char *arguments; /* its arguments' JSON text so far: each step's only adds to it */
	size_t n_arguments;
	bool done;             /* read to its end */
} loom_tool_call;

/* From its next push r reads tool calls in the reply, in the tool format
 * of its template: a call's text leaves the content. opening: what the
 * prompt ended with to open a call for the model (loom_tool_call_opening;
 * NULL or "": nothing), read as if the model had written it. */
LOOM_API loom_status loom_reply_reader_read_tools(loom_reply_reader *r, const char *opening);
/* The calls read so far, in order (valid until the next push): *n of
 * them, each size bytes apart. */
LOOM_API loom_status loom_reply_reader_tool_calls_sized(loom_reply_reader *r, const loom_tool_call **calls, size_t *n,
							size_t size);
/* Their number (0 on an error, with *calls NULL). */
static inline size_t loom_reply_reader_tool_calls(loom_reply_reader *r, const loom_tool_call **calls)
{
	size_t n = 0;
	if (loom_reply_reader_tool_calls_sized(r, calls, &n, sizeof(**calls)) != LOOM_OK)
		return 0;
	return n;
}
/* Whether the reply is inside a call whose text is not whole yet: where
 * a host arms the call grammar (loom_tool_grammar) when the model opened
 * the call itself. */
LOOM_API bool loom_reply_reader_in_tool_call(const loom_reply_reader *r);

/* What loom_tool_grammar's grammar takes. */
enum {
	LOOM_TOOL_GRAMMAR_PARALLEL = 1,    /* one call or more (else exactly one) */
	LOOM_TOOL_GRAMMAR_WHOLE_REPLY = 2, /* the whole reply, in formats whose calls have no marker */
	LOOM_TOOL_GRAMMAR_ANSWER = 4,      /* with WHOLE_REPLY: a plain answer instead, where the format has one */
};

/* The grammar of tool calls in the model's format, over tools (as
 * loom_chat_apply_json's); only_name names the one function allowed
 * (NULL: any of them). Without LOOM_TOOL_GRAMMAR_WHOLE_REPLY, the text of
 * the calls after the format's opening marker: a host arms it when
 * loom_reply_reader_in_tool_call turns true (the model opened a call),
 * or from the start after loom_tool_call_opening (the host opened one).
 * Each function's parameters are a JSON Schema compiled as
 * loom_grammar_from_json_schema compiles one, refused as it refuses;
 * function names are 1 to 64 of a-z, A-Z, 0-9, _ and -. */
LOOM_API loom_status loom_tool_grammar(const loom_model *model, const char *template_name, const char *tools_json,
				       size_t tools_len, const char *only_name, unsigned flags, loom_grammar **out);
/* How a format's calls open (loom_tool_call_opening's flags). */
enum {
	LOOM_TOOL_OPENING_WHOLE_REPLY = 1, /* calls have no marker: a whole-reply grammar makes a call */
	LOOM_TOOL_OPENING_BY_NAME = 2,     /* each call is a message of its own whose text is the arguments:
					    * its grammar is loom_tool_grammar's for the name the reader
					    * read (loom_reply_reader_tool_calls) */
};

/* What a prompt ends with (after the assistant's opening) to make the
 * reply a tool call in the model's format, name the function (NULL: any
 * tool), written to buf as loom_chat_apply writes (NUL-terminated, *n_out
 * its length): the format's opening marker, or nothing where a whole-reply
 * grammar makes the call. *flags gets LOOM_TOOL_OPENING_*. */
LOOM_API loom_status loom_tool_call_opening(const loom_model *model, const char *template_name, const char *name,
					    char *buf, size_t size, size_t *n_out, unsigned *flags);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_H */
