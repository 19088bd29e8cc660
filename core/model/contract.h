/* contract.h - an architecture contract (arch/NAME.yaml): a model family as
 * choices over the generic transformer block, plus where each file format
 * keeps its hyperparameters and tensors. */
#ifndef LOOM_CONTRACT_H
#define LOOM_CONTRACT_H

#include "loom.h"
#include "text/vocab.h"
#include "text/chat_template.h"

#include <stdbool.h>

typedef enum loom_norm_kind { LOOM_NORM_RMSNORM, LOOM_NORM_LAYERNORM } loom_norm_kind;
typedef enum loom_ffn_kind {
	LOOM_FFN_SWIGLU, /* down(silu(gate(x)) * up(x)) */
	LOOM_FFN_GEGLU,  /* down(gelu(gate(x)) * up(x)) */
	LOOM_FFN_MLP     /* down(act(up(x))) */
} loom_ffn_kind;
typedef enum loom_activation {
	LOOM_ACT_SILU,
	LOOM_ACT_GELU,
	LOOM_ACT_GELU_TANH,
	LOOM_ACT_SWIGLU_OAI /* swiglu's gate and up clamped, gate's sigmoid sharpened, up + 1 (gpt-oss) */
} loom_activation;
typedef enum loom_positions_kind { LOOM_POSITIONS_ROPE, LOOM_POSITIONS_LEARNED } loom_positions_kind;
typedef enum loom_qkv_kind { LOOM_QKV_SEPARATE, LOOM_QKV_FUSED } loom_qkv_kind;
typedef enum loom_gate_up_kind {
	LOOM_GATE_UP_SEPARATE,   /* ffn_gate_exps and ffn_up_exps */
	LOOM_GATE_UP_FUSED,      /* one ffn_up_exps: each expert's gate rows, then its up rows */
	LOOM_GATE_UP_INTERLEAVED /* one ffn_up_exps: each expert's gate and up rows alternating */
} loom_gate_up_kind;
typedef enum loom_residual_kind {
	LOOM_RESIDUAL_SEQUENTIAL, /* x += attn(norm(x)); x += ffn(ffn_norm(x)) */
	LOOM_RESIDUAL_PARALLEL    /* x += attn(norm(x)) + ffn(norm(x)) */
} loom_residual_kind;
typedef enum loom_qk_norm_kind {
	LOOM_QK_NORM_NONE,
	LOOM_QK_NORM_PER_HEAD, /* each head's q and k, weights of head_dim (Qwen3) */
	LOOM_QK_NORM_FULL      /* all of q and all of k, weights of q's and k's widths (OLMo 2, OLMoE) */
} loom_qk_norm_kind;
typedef enum loom_tied_kind {
	LOOM_TIED_NEVER,      /* output.weight must exist */
	LOOM_TIED_ALWAYS,     /* the head is the token embedding */
	LOOM_TIED_IF_MISSING  /* the token embedding stands in when output is absent */
} loom_tied_kind;

/* Hyperparameters the generic block reads. */
typedef enum loom_hparam {
	LOOM_HP_N_EMBD,
	LOOM_HP_N_LAYER,
	LOOM_HP_N_FF,
	LOOM_HP_N_HEAD,
	LOOM_HP_N_HEAD_KV,   /* default: n_head */
	LOOM_HP_HEAD_DIM,    /* default: n_embd / n_head */
	LOOM_HP_HEAD_DIM_V,  /* the value heads' width: must equal head_dim */
	LOOM_HP_N_ROT,       /* default: head_dim */
	LOOM_HP_N_CTX_TRAIN,
	LOOM_HP_NORM_EPS,
	LOOM_HP_ROPE_THETA,
	LOOM_HP_ROPE_SCALING_TYPE,   /* a string: none, linear, yarn or llama3; default none */
	LOOM_HP_ROPE_SCALING_FACTOR, /* the context's stretch: frequencies scale by 1 / it */
	LOOM_HP_ROPE_ORIG_CTX,       /* YaRN: the original context; default n_ctx_train */
	LOOM_HP_ROPE_ATTN_FACTOR,    /* YaRN: cos and sin scale; default 1 */
	LOOM_HP_ROPE_BETA_FAST,      /* YaRN: default 32 */
	LOOM_HP_ROPE_BETA_SLOW,      /* YaRN: default 1 */
	LOOM_HP_ROPE_PARTIAL,        /* n_rot as a fraction of head_dim, when n_rot is not stored */
	LOOM_HP_ROPE_LOW_FREQ,       /* Llama 3 scaling: low_freq_factor; default 1 */
	LOOM_HP_ROPE_HIGH_FREQ,      /* Llama 3 scaling: high_freq_factor; default 4 */
	/* The modern families' scalars; the hyperparameters after here are ones
	 * llama has none of. */
	LOOM_HP_FINAL_LOGIT_SOFTCAP, /* logits = c tanh(logits / c) (Gemma 2); absent or 0: none */
	LOOM_HP_EMBEDDING_MULT,      /* the token embeddings times it (Granite); default 1 */
	LOOM_HP_RESIDUAL_MULT,       /* each block output times it before its residual add; default 1 */
	LOOM_HP_ATTENTION_MULT,      /* the factor on q.k in place of block.attention_scale */
	LOOM_HP_LOGIT_SCALE,         /* the logits divided by it (Granite); default 1 */
	LOOM_HP_ATTENTION_SCALE_BASE, /* q.k times it^-1/2 (Gemma's query_pre_attn_scalar) */
	LOOM_HP_ATTN_LOGIT_SOFTCAP,  /* attention scores = c tanh(s / c) (Gemma 2); absent or 0: none */
	LOOM_HP_SLIDING_WINDOW,      /* windowed layers see the last this many positions; absent or 0: none */
	LOOM_HP_SLIDING_WINDOW_PATTERN, /* n: layer i is windowed unless (i + 1) % n == 0; 0: every layer; or a list of
					 * n_layer flags, 1 windowed (llama.cpp's array form) */
	LOOM_HP_LAYER_TYPES,         /* a list of n_layer sliding_attention / full_attention (Hugging Face's); over the pattern */
	LOOM_HP_ROPE_THETA_SWA,      /* windowed layers' RoPE base, unscaled (Gemma 3); absent: as the others */
	/* A mixture of experts (block.experts). */
	LOOM_HP_N_EXPERT,            /* experts per layer; absent or 0: a dense FFN */
	LOOM_HP_N_EXPERT_USED,       /* experts each token goes to */
	LOOM_HP_N_FF_EXPERT,         /* an expert's FFN width; default n_ff */
	LOOM_HP_EXPERT_WEIGHTS_NORM, /* nonzero: the chosen experts' weights divided by their sum */
	LOOM_HP_EXPERT_WEIGHTS_SCALE, /* a factor on those weights; default 1 */
	LOOM_HP_N_DENSE_LAYERS,      /* the first this many layers keep a dense FFN; default 0 */
	LOOM_HP_N_FF_SHARED,         /* the shared expert's FFN width; default n_ff_expert * n_expert_shared, else n_ff */
	LOOM_HP_N_EXPERT_SHARED,     /* shared experts, run as one n_expert_shared times an expert's width; default 0 */
	LOOM_HP_EXPERT_GATING_FUNC,  /* 1 softmax, 2 sigmoid, 3 softmax_selected (llama.cpp's numbers); default: block.experts.gating */
	LOOM_HP_SWIGLU_ALPHA,        /* activation swiglu_oai: the gate's sigmoid sharpness; default 1.702 */
	LOOM_HP_SWIGLU_LIMIT,        /* activation swiglu_oai: the clamp; default 7 */
	LOOM_HP_LOGIT_MULT,          /* the logits times it (Cohere's logit_scale); default 1 */
	LOOM_HP_ROPE_TRUNCATE,       /* YaRN: 0: the ramp's ends not rounded to whole pairs (transformers' truncate); default 1 */
	LOOM_HP_ROPE_FACTORS_LONG,   /* LongRoPE: n_rot / 2 factors past rope_orig_ctx, a list in place of the tensor */
	LOOM_HP_ROPE_FACTORS_SHORT,  /* LongRoPE: the factors within it */
	LOOM_HP_NO_ROPE_LAYERS,      /* a list of n_layer flags, 0: the layer has no RoPE (Hugging Face's no_rope_layers,
				      * named for what its zeros switch off); over the interval */
	LOOM_HP_NO_ROPE_LAYER_INTERVAL, /* n: layer i has no RoPE when (i + 1) % n == 0 (SmolLM3's 4); absent or 0: none */
	LOOM_HP_COUNT
} loom_hparam;

/* Weight tensors the generic block may use: the model's, then each
 * layer's (loom_role_is_per_layer). _B is a bias. */
typedef enum loom_role {
	LOOM_ROLE_TOKEN_EMBD,
	LOOM_ROLE_POS_EMBD,
	LOOM_ROLE_OUTPUT_NORM,
	LOOM_ROLE_OUTPUT_NORM_B,
	LOOM_ROLE_OUTPUT,
	LOOM_ROLE_OUTPUT_B,
	LOOM_ROLE_ROPE_FREQS, /* optional: Llama 3's RoPE frequency factors */
	LOOM_ROLE_ROPE_FACTORS_LONG,  /* optional: LongRoPE's factors, for contexts past rope_orig_ctx (Phi-3) */
	LOOM_ROLE_ROPE_FACTORS_SHORT, /* optional: LongRoPE's factors, for contexts within it */
	LOOM_ROLE_ATTN_NORM,
	LOOM_ROLE_ATTN_NORM_B,
	LOOM_ROLE_ATTN_QKV,
	LOOM_ROLE_ATTN_QKV_B,
	LOOM_ROLE_ATTN_Q,
	LOOM_ROLE_ATTN_Q_B,
	LOOM_ROLE_ATTN_K,
	LOOM_ROLE_ATTN_K_B,
	LOOM_ROLE_ATTN_V,
	LOOM_ROLE_ATTN_V_B,
	LOOM_ROLE_ATTN_Q_NORM,
	LOOM_ROLE_ATTN_K_NORM,
	LOOM_ROLE_ATTN_OUTPUT,
	LOOM_ROLE_ATTN_OUTPUT_B,
	LOOM_ROLE_FFN_NORM,
	LOOM_ROLE_FFN_NORM_B,
	LOOM_ROLE_FFN_GATE,
	LOOM_ROLE_FFN_GATE_B,
	LOOM_ROLE_FFN_UP,
	LOOM_ROLE_FFN_UP_B,
	LOOM_ROLE_FFN_DOWN,
	LOOM_ROLE_FFN_DOWN_B,
	LOOM_ROLE_ATTN_POST_NORM, /* block.post_norm: the attention's output, normalised */
	LOOM_ROLE_FFN_POST_NORM,  /* block.post_norm: the FFN's output, normalised */
	LOOM_ROLE_ATTN_SINKS,     /* block.attention_sinks: a logit per head in the softmax's denominator */
	LOOM_ROLE_FFN_GATE_INP,   /* block.experts: the router, {n_embd, n_expert} */
	LOOM_ROLE_FFN_GATE_EXPS,  /* block.experts: every expert's gate, {n_embd, n_ff_exp, n_expert} */
	LOOM_ROLE_FFN_UP_EXPS,
	LOOM_ROLE_FFN_DOWN_EXPS,  /* {n_ff_exp, n_embd, n_expert} */
	LOOM_ROLE_FFN_GATE_INP_SHEXP, /* block.experts.shared_expert: gated: its gate's weights, {n_embd} */
	LOOM_ROLE_FFN_GATE_SHEXP,     /* the shared expert, {n_embd, n_ff_shared} */
	LOOM_ROLE_FFN_UP_SHEXP,
	LOOM_ROLE_FFN_DOWN_SHEXP,     /* {n_ff_shared, n_embd} */
	LOOM_ROLE_FFN_GATE_INP_B,     /* biases: [router]: the router's bias, {n_expert} */
	LOOM_ROLE_FFN_GATE_EXPS_B,    /* biases: [experts]: each expert's gate bias, {n_ff_exp, n_expert} */
	LOOM_ROLE_FFN_UP_EXPS_B,
	LOOM_ROLE_FFN_DOWN_EXPS_B,    /* {n_embd, n_expert} */
	LOOM_ROLE_FFN_EXP_PROBS_B,    /* block.experts.selection_bias: added to the sigmoids to choose, {n_expert} */
	LOOM_ROLE_COUNT
} loom_role;

/* The projections that may carry a bias (block.biases). */
typedef enum loom_bias {
	LOOM_BIAS_Q,
	LOOM_BIAS_K,
	LOOM_BIAS_V,
	LOOM_BIAS_QKV,
	LOOM_BIAS_O,
	LOOM_BIAS_GATE,
	LOOM_BIAS_UP,
	LOOM_BIAS_DOWN,
	LOOM_BIAS_OUTPUT,
	LOOM_BIAS_ROUTER,  /* a mixture of experts' router */
	LOOM_BIAS_EXPERTS, /* each expert's gate, up and down */
	LOOM_BIAS_COUNT
} loom_bias;

/* The sections of a contract that name a format's keys and tensors: GGUF's
 * names, Hugging Face's. A format plugin declares which one its files use
 * (loom_format_vtable.contract_section). */
typedef enum loom_contract_format {
	LOOM_CFMT_GGUF,
	LOOM_CFMT_SAFETENSORS,
	LOOM_CFMT_COUNT
} loom_contract_format;

/* Where a format keeps a value: one or more spellings, tried in order,
 * NULL-terminated (Hugging Face checkpoints of one family do not all
 * agree on their names). NULL: the format does not store it. */
typedef char **loom_spellings;

typedef struct loom_contract {
	char *name;
	/* The GGUF architecture a model with experts is written as, where
	 * llama.cpp names it apart from the dense family (granitemoe); NULL:
	 * name. */
	char *moe_architecture;
	char *path;
	/* false for a contract that describes only the family's tokenizer
	 * (no block, hparams or tensors): its models can be tokenized, not run. */
	bool has_block;
	/* What the family's vocabularies need that their files do not record. */
	loom_vocab_rules tokenizer;
	loom_norm_kind norm;
	bool norm_bias;           /* layernorm: the norms have biases */
	/* Per format: added to every norm weight (Gemma's 1 + w, where a
	 * format stores w). */
	float norm_weight_offset[LOOM_CFMT_COUNT];
	loom_ffn_kind ffn;
	loom_activation activation;
	loom_positions_kind positions;
	/* loom_rope_style, per format: GGUF llama files store Q and K
	 * permuted for adjacent-pair rotation, Hugging Face ones do not. */
	int rope_style[LOOM_CFMT_COUNT];
	loom_qkv_kind qkv[LOOM_CFMT_COUNT]; /* per format: Phi-2's GGUF fuses what HF keeps apart */
	/* per format: one ffn_up whose rows are the gate's, then up's (Phi-3) */
	loom_qkv_kind gate_up[LOOM_CFMT_COUNT];
	loom_qk_norm_kind qk_norm; /* RMSNorm of q and k before RoPE */
	bool pre_norm;  /* the attention's and the FFN's inputs normalised (all but OLMo 2) */
	bool global_rope; /* layers without a window rotate q and k too (all but Cohere 2) */
	bool post_norm; /* the attention's and the FFN's outputs normalised before each residual add */
	bool attn_sinks; /* each head's softmax has a learned sink (gpt-oss) */
	/* block.experts: a file with experts (n_expert > 0) has a mixture of
	 * experts for its FFN, its weights by this gating (loom_gating). A
	 * contract with experts may leave the dense FFN's tensors unnamed. */
	bool experts;
	int expert_gating;
	/* Every token also runs a shared expert, its output added as is
	 * (DeepSeek, dots.llm1) or weighted by the sigmoid of a gate of its
	 * own (Qwen2-MoE). */
	bool shared_expert;
	bool shared_expert_gated;
	/* The experts are chosen by their sigmoids plus a bias of their own
	 * (ffn_exp_probs_bias) and weighted by the sigmoids alone
	 * (DeepSeek-V3, dots.llm1). */
	bool selection_bias;
	/* Whether a format's ffn_up_exps holds each expert's gate and up as
	 * one matrix (Granite MoE's input_linear, gpt-oss's gate_up_proj in
	 * Hugging Face's files), naming no ffn_gate_exps. */
	loom_gate_up_kind experts_gate_up[LOOM_CFMT_COUNT];
	loom_residual_kind residual;
	loom_tied_kind tied;
	bool bias[LOOM_BIAS_COUNT];
	bool embd_scale_sqrt;     /* token embeddings times sqrt(n_embd) */
	float embd_scale;         /* else times this */
	bool attn_scale_default;  /* 1 / sqrt(head_dim) */
	float attn_scale;         /* else this */
	bool has_chat_template;   /* the family's chat format, for files without one */
	loom_chat_kind chat_template;
	/* Where each format keeps each hyperparameter ("{arch}" stands for the
	 * file's architecture name); NULL: not stored. */
	loom_spellings hparam_keys[LOOM_CFMT_COUNT][LOOM_HP_COUNT];
	bool has_default[LOOM_HP_COUNT];
	double defaults[LOOM_HP_COUNT];
	/* defaults_by_layers: defaults for the models of one depth, over
	 * those above (llama.cpp's rules for one size of a family, which its
	 * GGUF files do not store). */
	struct loom_layer_defaults {
		int64_t n_layer;
		bool has_default[LOOM_HP_COUNT];
		double defaults[LOOM_HP_COUNT];
	} *layer_defaults;
	int n_layer_defaults;
	/* Tensor names per format ("{i}" stands for the layer); NULL: unused. */
	loom_spellings tensor_names[LOOM_CFMT_COUNT][LOOM_ROLE_COUNT];
	/* Matrices a format stores as {n_out, n_in} (GPT-2's Conv1D). */
	bool transposed[LOOM_CFMT_COUNT][LOOM_ROLE_COUNT];
	/* Other architecture names files give this family (Hugging Face's
	 * model_type "mistral" for llama.yaml); NULL-terminated or NULL. */
	char **aliases;
} loom_contract;

const char *loom_hparam_name(loom_hparam hp);
const char *loom_role_name(loom_role role);
bool loom_role_is_per_layer(loom_role role);
/* A role whose tensor a file may lack (and a contract need not name). */
bool loom_role_is_optional(loom_role role);
/* The section called name ("gguf", "safetensors"); -1 if none. */
int loom_contract_format_index(const char *name);
const char *loom_contract_format_name(loom_contract_format f);
/* A role whose tensor is a norm's weight (norm_weight_offset applies). */
bool loom_role_is_norm(loom_role role);
/* A role whose tensor is a matrix (may be transposed). */
bool loom_role_is_matrix(loom_role role);
/* A role whose tensor holds every expert's matrix, {n_in, n_out, n_expert}. */
bool loom_role_is_experts(loom_role role);
/* A mixture-of-experts layer's: the router, the experts, the shared expert
 * and its gate. */
bool loom_role_is_moe(loom_role role);
/* A dense FFN's matrices and biases, which a mixture-of-experts layer has
 * none of. */
bool loom_role_is_dense_ffn(loom_role role);

/* pattern with its placeholder ("{arch}", "{i}") replaced by value, into
 * buf: "{arch}.embedding_length" -> "llama.embedding_length". */
void loom_contract_expand(char *buf, size_t size, const char *pattern, const char *placeholder, const char *value);

/* Reads and checks a contract; errors (LOOM_ERR_CONTRACT) name file and line. */
loom_status loom_contract_load(const char *path, loom_contract **out);
/* Finds NAME.yaml in dirs (in order), else the first contract (by file
 * name) whose aliases list NAME, and loads it; NOT_FOUND lists the dirs. */
loom_status loom_contract_find(const char *name, char *const *dirs, int n_dirs, loom_contract **out);
void loom_contract_free(loom_contract *c);

/* Roles the contract's choices need in format f's files; tensors of other
 * roles are not read. */
bool loom_contract_uses_role(const loom_contract *c, loom_contract_format f, loom_role role);

#endif
