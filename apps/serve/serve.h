/* serve.h - `loom serve`: what its parts share. The HTTP side (http.c)
 * turns requests into serve_request objects and queues them; the scheduler
 * (scheduler.c) runs every admitted request in one batch per step and hands
 * its output back. One mutex guards what they share. */
#ifndef LOOM_SERVE_H
#define LOOM_SERVE_H

#include <loom.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits a client meets; docs/serving.md lists them. */
#define SERVE_MAX_BODY (8u << 20)   /* request body bytes (413 past it) */
#define SERVE_MAX_DRAIN (64u << 20) /* an over-limit body read and dropped before its 413 (past it: refused at once) */
#define SERVE_MAX_STOP 16           /* stop strings per request */
#define SERVE_MAX_LOGIT_BIAS 1024   /* tokens a request's logit_bias may name */
#define SERVE_MAX_TOOLS 128         /* tools a request may list */
#define SERVE_MAX_TOP_LOGPROBS LOOM_MAX_TOP_LOGPROBS /* alternatives per token (20) */
#define SERVE_MAX_EMBED_INPUTS 2048 /* texts per embeddings request */
#define SERVE_MAX_CONNECTIONS 1024  /* open connections */
#define SERVE_IDLE_TIMEOUT_S 60     /* an idle connection is closed after this */

typedef struct serve_buf {
	char *data;
	size_t len, cap;
} serve_buf;

bool serve_buf_append(serve_buf *b, const char *data, size_t len);
bool serve_buf_appendf(serve_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void serve_buf_free(serve_buf *b);

typedef enum serve_kind {
	SERVE_COMPLETION,
	SERVE_CHAT,
	SERVE_EMBEDDING,
} serve_kind;

typedef enum serve_state {
	SERVE_QUEUED,
	SERVE_RUNNING,
	SERVE_DONE,
} serve_state;

/* A generated token's log-probability and its most likely alternatives. */
typedef struct serve_logprob {
	loom_token token;
	float logprob;
	int32_t n_top;
	uint32_t text_offset; /* completions: bytes of generated text before it */
	loom_token top[SERVE_MAX_TOP_LOGPROBS];
	float top_logprob[SERVE_MAX_TOP_LOGPROBS];
} serve_logprob;

typedef enum serve_finish {
	SERVE_FINISH_LENGTH,
	SERVE_FINISH_STOP,
	SERVE_FINISH_TOOL_CALLS, /* the reply ended with tool calls */
} serve_finish;

/* One API request. The HTTP side fills the first group before queueing it;
 * then only the scheduler writes the private group, and both sides touch
 * the shared group under the server's lock. */
typedef struct serve_request {
	serve_kind kind;
	char id[48];
	int64_t created;
	loom_token *prompt; /* completions and chat: the tokens to continue */
	size_t n_prompt;
	int32_t max_tokens; /* most tokens to generate */
	loom_sampler_params sampling;
	char **stop;
	size_t n_stop;
	loom_token *bias_tokens; /* logit_bias: added to these tokens' logits */
	float *bias;
	size_t n_bias;
	const loom_grammar *grammar; /* response_format's, the reply follows it; NULL: none */
	loom_grammar *own_grammar;   /* the request's own when the cache was full */
	/* Tools (chat): the reply's tool calls are read out of it when
	 * read_tools; their grammar constrains a call's text while the
	 * reply is in one (tool_whole: the whole reply, from the start). */
	bool read_tools;
	char *tool_opening;  /* what the prompt ends with to open a call for the model; NULL: none */
	bool parallel_tools; /* more than one call may come */
	bool tool_whole;
	bool tool_by_name;   /* a call's grammar is its function's (harmony) */
	char *tools_json;    /* tool_by_name: the tools, for the grammar of each call */
	const loom_grammar *tool_grammar;
	loom_grammar *own_tool_grammar;
	int32_t logprobs;  /* -1: none; else alternatives per token (0..20) */
	bool stream;
	bool include_usage;
	loom_token **inputs; /* embeddings: one token list per input */
	size_t *n_inputs;
	size_t n_input;
	bool base64; /* embeddings as base64 of little-endian float32 */

	/* Shared, under the server lock. */
	struct MHD_Connection *conn;
	int fd;                 /* the connection's socket, to notice a client gone */
	bool suspended;         /* the HTTP side parked the connection until output comes */
	bool client_gone;       /* the connection ended: the scheduler drops the request */
	serve_state state;
	int refs;               /* the connection's and the scheduler's */
	serve_buf out;          /* bytes for the client not yet handed to the HTTP side */
	int status;             /* the reply's HTTP status; 0 until its first bytes are out */
	struct serve_request *next; /* queue link */

	/* Scheduler's own. */
	loom_generator *gen;     /* the token step: sampling, stop conditions, text */
	loom_reply_reader *reader; /* chat: the reply's content apart from its reasoning */
	char *error;             /* why the request failed while stepping (malloc'd), for its reply */
	serve_buf pending;       /* output of the last step, for the shared out */
	serve_buf text;          /* the whole reply (not streamed) */
	serve_buf reasoning;     /* chat: the whole reply's reasoning (not streamed) */
	struct serve_logprob *lps; /* logprobs not yet sent */
	size_t n_lps, cap_lps;
	loom_token *resume;      /* after preemption: prompt and generated tokens to evaluate again */
	size_t n_resume;
	size_t embed_next;       /* embeddings: the next input to run */
	float *embeddings;       /* n_input * n_embd */
	size_t text_offset;      /* completions logprobs: bytes of text before the next token */
	int32_t n_generated;
	int32_t n_cached_prompt; /* prompt tokens found in the cache */
	double t_queued, t_first; /* when it was queued and its first token came (seconds) */
	bool role_sent;          /* chat stream: the assistant's opening chunk has gone */
	bool tool_armed;         /* the tool grammar is the generator's now */
	char (*call_ids)[32];    /* each tool call's id, made when it is first seen */
	size_t *call_sent;       /* stream: argument bytes sent of each call */
	size_t n_calls_seen, n_calls_sent, cap_calls;
	serve_finish finish;
} serve_request;

/* A sequence of the cache and the request running on it. Between
 * requests it keeps its tokens cached, so a request that starts with them
 * (a chat's next turn) evaluates only the rest. */
typedef struct serve_slot {
	int32_t seq;
	serve_request *req;  /* NULL: free */
	loom_token *tokens;  /* what the cache holds ([0, n_cached)), then what to evaluate */
	size_t n_tokens, cap, n_cached;
	uint64_t last_used;  /* step it last ran in: idle slots give up their cells oldest first */
	uint64_t admitted;   /* admission order: preemption takes the newest */
} serve_slot;

typedef struct serve_metrics {
	uint64_t requests[3];      /* by kind */
	uint64_t finished, cancelled, rejected_queue_full, preempted;
	uint64_t prompt_tokens, prompt_tokens_cached, generated_tokens;
	uint64_t steps, step_tokens, step_tokens_max;
	double step_seconds_max;
	uint64_t http_errors[6];   /* 400 401 404 405 413 503 */
} serve_metrics;

typedef struct serve_config {
	const char *host;
	int port;
	int n_slots;
	int queue_size;
	int prompt_chunk; /* most prompt tokens in a step that also generates */
	const char *api_key;
	bool verbose; /* a line on stderr per finished request */
} serve_config;

typedef struct serve_server {
	loom_model *model;
	loom_context *ctx;
	char model_id[256];
	char *model_id_json; /* model_id as a JSON string */
	serve_config cfg;
	int32_t n_vocab, n_embd;
	int n_threads; /* the runtime's compute threads, which also step the streams */
	uint32_t n_ctx, n_batch;
	int64_t started;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	serve_request *queue_head, *queue_tail;
	int queue_len;
	serve_slot *slots;
	int n_running;
	bool draining;   /* no new work: queued requests are refused */
	bool cancel_all; /* running requests are cut short too */
	bool stopping;
	uint64_t n_requests;
	uint64_t step;
	serve_metrics metrics;
	uint32_t kv_used; /* cells in use after the last step (the context is the scheduler's) */
	serve_request *embedding; /* the embeddings request running, one input per step */

	struct serve_grammars *grammars;
	bool tool_marker_token; /* the template's tool-call marker is one token */

	struct MHD_Daemon *daemon;
	pthread_t scheduler;
	bool scheduler_started;
} serve_server;

/* Compiled grammars shared by requests (grammars.c). */
typedef struct serve_grammars serve_grammars;
serve_grammars *serve_grammars_new(void);
void serve_grammars_free(serve_grammars *c);
/* The grammar compiled from text (a JSON Schema, or GBNF), from the cache
 * or compiled now; *owned is set when the cache is full and the caller
 * must free it. The compile's status, loom_last_error() saying why. */
loom_status serve_grammar_get(serve_grammars *c, bool json_schema, const char *text, size_t len,
			      const loom_grammar **out, loom_grammar **owned);
/* The same for the grammar of tool calls over tools (loom_tool_grammar). */
loom_status serve_tool_grammar_get(serve_grammars *c, const loom_model *model, const char *tools, size_t len,
				   const char *only_name, unsigned flags, const loom_grammar **out, loom_grammar **owned);

/* Requests (request.c). */
serve_request *serve_request_new(serve_kind kind);
/* Drops one reference; the last frees it. Under the lock once the
 * scheduler holds one too. */
void serve_request_unref(serve_request *r);

/* Parsing request bodies (api_parse.c): 0 on success, else the HTTP status,
 * with *err (malloc'd) the message and *param the field at fault. */
int serve_parse_completion(serve_server *s, const char *body, size_t len, serve_kind kind, serve_request *r,
			   char **err, const char **param);
int serve_parse_embedding(serve_server *s, const char *body, size_t len, serve_request *r, char **err,
			  const char **param);
int serve_parse_tokenize(serve_server *s, const char *body, size_t len, char **reply, char **err);
int serve_parse_detokenize(serve_server *s, const char *body, size_t len, char **reply, char **err);

/* Replies (api_reply.c), as malloc'd JSON text. */
char *serve_reply_error(const char *message, const char *type, const char *param, const char *code);
char *serve_reply_models(const serve_server *s);
/* A streamed event: text and the logprobs r holds, or, with finish set,
 * the closing chunk (then the usage chunk if asked for, and [DONE]). */
bool serve_reply_chunk(serve_server *s, serve_request *r, const loom_reply_parts *p, bool finish,
		       serve_buf *out);
/* The whole reply of a request not streamed. */
bool serve_reply_final(serve_server *s, serve_request *r, serve_buf *out);
bool serve_reply_embeddings(serve_server *s, serve_request *r, serve_buf *out);
/* A failure after the reply has started: an SSE error event and [DONE]. */
bool serve_reply_stream_error(serve_buf *out, const char *message);
/* Stream: chunks for the tool calls r's reader has read since the last
 * (a call's first with its id, type and name, then its arguments' new
 * bytes). */
bool serve_reply_tool_deltas(serve_server *s, serve_request *r, serve_buf *out);
/* The id of r's tool call i, made the first time it is asked for. */
const char *serve_call_id(serve_request *r, size_t i);
/* Records a generated token's logprob and top alternatives. */
bool serve_logprob_add(serve_server *s, serve_request *r, const loom_generated *g);
/* Token t's text into buf (at least SERVE_PIECE_MAX bytes); its length,
 * 0 if it has none or is longer. */
#define SERVE_PIECE_MAX 256
size_t serve_token_piece(const serve_server *s, loom_token t, bool special, char *buf);
/* Text as a JSON string (quotes included), invalid UTF-8 replaced by U+FFFD. */
bool serve_json_string(serve_buf *out, const char *text, size_t len);

/* The scheduler (scheduler.c). */
bool serve_scheduler_start(serve_server *s);
void serve_scheduler_stop(serve_server *s);
/* Queues r (under the lock); false when the queue is full. */
bool serve_enqueue(serve_server *s, serve_request *r);

/* The HTTP side (http.c). */
bool serve_http_start(serve_server *s);
/* Stops accepting connections. */
void serve_http_quiesce(serve_server *s);
void serve_http_stop(serve_server *s);
/* Wakes a parked connection that has output (under the lock). */
void serve_http_resume(serve_request *r);

/* Metrics as Prometheus text (metrics.c), malloc'd. */
char *serve_metrics_text(serve_server *s);

#endif
