/*
 * st_pretokenizer.c - a tokenizer.json's normalizer, pre_tokenizer and
 * decoder mapped onto GGUF's keys (st_pretokenizer.h).
 *
 * A byte-level BPE's pre_tokenizer is a list of steps (Split by a regular
 * expression, Digits, ByteLevel with or without GPT-2's own expression);
 * the table below gives, in Hugging Face's spelling, the lists whose
 * tokenizer.ggml.pre name in core/pretokenizer.c cuts text into the same
 * words. Only lists known for certain are here: one that is not is an
 * error quoting it, where llama.cpp's converter would fall back to a
 * default and tokenize differently.
 */
#include "st_pretokenizer.h"
#include "st_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Byte-level pre-tokenizers                                                */

/* Llama 3's split, exactly as its tokenizer.json has it. */
#define HF_RE_LLAMA3                                                                      \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"            \
	" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Qwen2's: Llama 3's with single digits. */
#define HF_RE_QWEN2                                                                       \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"                 \
	" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

enum step_kind {
	STEP_END = 0,
	STEP_SPLIT,           /* Split {Regex}, Isolated, not inverted */
	STEP_DIGITS,          /* Digits, individual_digits */
	STEP_BYTE_LEVEL_GPT2, /* ByteLevel with GPT-2's expression (use_regex) */
	STEP_BYTE_LEVEL,      /* ByteLevel, bytes to characters only */
};

#define MAX_STEPS 8

struct step {
	enum step_kind kind;
	const char *regex; /* STEP_SPLIT */
};

static const struct known_pretok {
	const char *name;   /* tokenizer.ggml.pre */
	bool ignore_merges; /* the model.ignore_merges it goes with */
	struct step steps[MAX_STEPS];
} known_pretoks[] = {
	/* GPT-2, GPT-J, GPT-NeoX, MPT, OLMo, Phi-2 */
	{"gpt-2", false, {{STEP_BYTE_LEVEL_GPT2, NULL}}},
	/* Llama 3 keeps a word that is a token whole ... */
	{"llama-bpe", true, {{STEP_SPLIT, HF_RE_LLAMA3}, {STEP_BYTE_LEVEL, NULL}}},
	/* ... and its derivatives that merge it (Smaug, DBRX) */
	{"smaug-bpe", false, {{STEP_SPLIT, HF_RE_LLAMA3}, {STEP_BYTE_LEVEL, NULL}}},
	/* Qwen 1.5 to 3, DeepSeek-R1's Qwen distillations */
	{"qwen2", false, {{STEP_SPLIT, HF_RE_QWEN2}, {STEP_BYTE_LEVEL, NULL}}},
	/* StarCoder, Refact, SmolLM */
	{"starcoder", false, {{STEP_DIGITS, NULL}, {STEP_BYTE_LEVEL_GPT2, NULL}}},
};

/* ------------------------------------------------------------------------ */
/* Reading the JSON                                                         */

struct walk {
	const loom_host *host;
	const char *path;
	const char *part; /* "normalizer", "pre_tokenizer", "decoder" */
	st_pipeline *out;
	bool escapes_spaces;
	struct step steps[MAX_STEPS];
	int n_steps;
};

static const char *string_of(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(item) ? item->valuestring : NULL;
}

static bool string_is(const cJSON *obj, const char *key, const char *want)
{
	const char *s = string_of(obj, key);
	return s != NULL && strcmp(s, want) == 0;
}

/* obj[key] as a bool; missing or null is dflt, anything else -1. */
static int bool_of(const cJSON *obj, const char *key, bool dflt)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (item == NULL || cJSON_IsNull(item))
		return dflt;
	return cJSON_IsBool(item) ? cJSON_IsTrue(item) : -1;
}

/* Fails naming the part and quoting the node (cut short if long). */
static bool unsupported(const struct walk *w, const cJSON *node, const char *why)
{
	char *json = cJSON_PrintUnformatted(node);
	size_t len = json != NULL ? strlen(json) : 0;
	w->host->set_error("%s: %s %.300s%s is not supported: %s", w->path, w->part,
			   json != NULL ? json : "null", len > 300 ? "..." : "", why);
	free(json);
	return false;
}

typedef bool (*step_fn)(struct walk *w, const cJSON *step);

/* Calls fn on each step of node, Sequences (under seq_key) flattened;
 * a missing or null node has none. */
static bool each_step(struct walk *w, const cJSON *node, const char *seq_key, step_fn fn)
{
	if (node == NULL || cJSON_IsNull(node))
		return true;
	if (!cJSON_IsObject(node))
		return unsupported(w, node, "not an object");
	if (!string_is(node, "type", "Sequence"))
		return fn(w, node);
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(node, seq_key);
	if (!cJSON_IsArray(list))
		return unsupported(w, node, "a Sequence without its list");
	for (const cJSON *s = list->child; s != NULL; s = s->next)
		if (!each_step(w, s, seq_key, fn))
			return false;
	return true;
}

static bool walk_part(struct walk *w, const cJSON *tokenizer, const char *part,
		      const char *seq_key, step_fn fn)
{
	w->part = part;
	return each_step(w, cJSON_GetObjectItemCaseSensitive(tokenizer, part), seq_key, fn);
}

/* ------------------------------------------------------------------------ */
/* SentencePiece-style BPE                                                  */

static bool llama_normalizer(struct walk *w, const cJSON *n)
{
	const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(n, "pattern");
	if (string_is(n, "type", "Prepend") && string_is(n, "prepend", SPM_SPACE)) {
		w->out->add_space_prefix = true;
		return true;
	}
	if (string_is(n, "type", "Replace") && string_is(pattern, "String", " ") &&
	    string_is(n, "content", SPM_SPACE)) {
		w->escapes_spaces = true;
		return true;
	}
	/* llama.cpp ignores NFC too: text is nearly always composed. */
	if (string_is(n, "type", "NFC"))
		return true;
	return unsupported(w, n, "GGUF's SentencePiece-style tokenizer only writes spaces as "
				 "\"" SPM_SPACE "\" and may put one first");
}

static bool llama_pre_tokenizer(struct walk *w, const cJSON *p)
{
	const char *scheme = string_of(p, "prepend_scheme");
	int add_prefix = bool_of(p, "add_prefix_space", true), split = bool_of(p, "split", true);
	/* Gemma splits at spaces after its normalizer has replaced them all:
	 * nothing to split. */
	if (string_is(p, "type", "Split") && w->escapes_spaces &&
	    string_is(cJSON_GetObjectItemCaseSensitive(p, "pattern"), "String", " "))
		return true;
	if (!string_is(p, "type", "Metaspace") || !string_is(p, "replacement", SPM_SPACE) ||
	    split < 0 || (scheme == NULL && add_prefix < 0))
		return unsupported(w, p, "GGUF's SentencePiece-style tokenizer only knows Metaspace "
					 "with \"" SPM_SPACE "\"");
	/* "first" puts the "▁" before the text's first piece only, the core
	 * before each piece that starts the text or follows a special token:
	 * they differ only where the text itself holds special tokens. */
	if (scheme != NULL && strcmp(scheme, "always") != 0 && strcmp(scheme, "first") != 0 &&
	    strcmp(scheme, "never") != 0)
		return unsupported(w, p, "unknown prepend_scheme");
	w->escapes_spaces = true;
	w->out->add_space_prefix = scheme != NULL ? strcmp(scheme, "never") != 0 : add_prefix;
	w->out->split_words = split;
	return true;
}

static bool llama_decoder(struct walk *w, const cJSON *d)
{
	static const char *const known[] = {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"};
	const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(d, "pattern");
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (!string_is(d, "type", known[i]))
			continue;
		if (i == 0 && !(string_is(pattern, "String", SPM_SPACE) && string_is(d, "content", " ")))
			break;
		return true;
	}
	return unsupported(w, d, "the core decodes \"" SPM_SPACE "\" as a space and <0xXX> as a byte");
}

bool st_pipeline_llama(const loom_host *host, const char *path, const cJSON *tokenizer,
		       st_pipeline *out)
{
	struct walk w = {.host = host, .path = path, .out = out};
	*out = (st_pipeline){.pre = "default"};
	if (!walk_part(&w, tokenizer, "normalizer", "normalizers", llama_normalizer) ||
	    !walk_part(&w, tokenizer, "pre_tokenizer", "pretokenizers", llama_pre_tokenizer) ||
	    !walk_part(&w, tokenizer, "decoder", "decoders", llama_decoder))
		return false;
	if (!w.escapes_spaces) {
		host->set_error("%s: neither the normalizer nor the pre_tokenizer writes spaces as "
				"\"" SPM_SPACE "\" (Replace or Metaspace), which GGUF's "
				"SentencePiece-style tokenizer always does", path);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Byte-level BPE                                                           */

static bool gpt2_normalizer(struct walk *w, const cJSON *n)
{
	/* As llama.cpp: Qwen2 declares NFC, and text is nearly always
	 * composed already. */
	if (string_is(n, "type", "NFC"))
		return true;
	return unsupported(w, n, "GGUF's byte-level BPE does not normalize text");
}

static bool add_step(struct walk *w, const cJSON *p, enum step_kind kind, const char *regex)
{
	if (w->n_steps == MAX_STEPS)
		return unsupported(w, p, "too many steps");
	w->steps[w->n_steps++] = (struct step){.kind = kind, .regex = regex};
	return true;
}

static bool gpt2_pre_tokenizer(struct walk *w, const cJSON *p)
{
	const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(p, "pattern");
	const char *regex = string_of(pattern, "Regex");
	int use_regex = bool_of(p, "use_regex", true), add_prefix = bool_of(p, "add_prefix_space", false);
	if (string_is(p, "type", "ByteLevel")) {
		if (add_prefix != 0)
			return unsupported(w, p, "GGUF cannot say add_prefix_space");
		if (use_regex < 0)
			return unsupported(w, p, "use_regex is not a bool");
		return add_step(w, p, use_regex ? STEP_BYTE_LEVEL_GPT2 : STEP_BYTE_LEVEL, NULL);
	}
	if (string_is(p, "type", "Split") && regex != NULL && string_is(p, "behavior", "Isolated") &&
	    bool_of(p, "invert", false) == 0)
		return add_step(w, p, STEP_SPLIT, regex);
	/* Only steps some known list has: any other is refused here. */
	if (string_is(p, "type", "Digits") && bool_of(p, "individual_digits", false) == 1)
		return add_step(w, p, STEP_DIGITS, NULL);
	return unsupported(w, p, "not a step of any pre-tokenizer loom knows");
}

static bool gpt2_decoder(struct walk *w, const cJSON *d)
{
	if (string_is(d, "type", "ByteLevel"))
		return true;
	return unsupported(w, d, "GGUF's byte-level BPE decodes GPT-2's byte characters only");
}

static bool same_steps(const struct step *a, int n, const struct step *b)
{
	for (int i = 0; i < n; i++)
		if (a[i].kind != b[i].kind ||
		    (a[i].kind == STEP_SPLIT && strcmp(a[i].regex, b[i].regex) != 0))
			return false;
	return n == MAX_STEPS || b[n].kind == STEP_END;
}

bool st_pipeline_gpt2(const loom_host *host, const char *path, const cJSON *tokenizer,
		      bool ignore_merges, st_pipeline *out)
{
	struct walk w = {.host = host, .path = path, .out = out};
	*out = (st_pipeline){0};
	if (!walk_part(&w, tokenizer, "normalizer", "normalizers", gpt2_normalizer) ||
	    !walk_part(&w, tokenizer, "decoder", "decoders", gpt2_decoder) ||
	    !walk_part(&w, tokenizer, "pre_tokenizer", "pretokenizers", gpt2_pre_tokenizer))
		return false;
	bool byte_level = false;
	for (int i = 0; i < w.n_steps; i++)
		byte_level |= w.steps[i].kind == STEP_BYTE_LEVEL || w.steps[i].kind == STEP_BYTE_LEVEL_GPT2;
	if (!byte_level) {
		host->set_error("%s: a BPE with neither byte_fallback nor a ByteLevel pre_tokenizer "
				"works on characters, which GGUF's BPE tokenizers do not", path);
		return false;
	}
	const char *other = NULL;
	for (size_t i = 0; i < sizeof(known_pretoks) / sizeof(known_pretoks[0]); i++) {
		if (!same_steps(w.steps, w.n_steps, known_pretoks[i].steps))
			continue;
		if (known_pretoks[i].ignore_merges == ignore_merges) {
			out->pre = known_pretoks[i].name;
			return true;
		}
		other = known_pretoks[i].name;
	}
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(tokenizer, "pre_tokenizer");
	if (other != NULL) {
		host->set_error("%s: the pre_tokenizer is %s's, but model.ignore_merges is %s", path,
				other, ignore_merges ? "true" : "false");
		return false;
	}
	return unsupported(&w, pre,
			   "it is none of the pre-tokenizers loom knows (GPT-2's, Llama 3's, "
			   "Qwen2's, StarCoder's)");
}

/* ------------------------------------------------------------------------ */
/* WordPiece                                                                */

static bool bert_normalizer(struct walk *w, const cJSON *n)
{
	/* The core's WordPiece cleans text, lower-cases, strips accents and
	 * cuts out CJK ideographs, as BertNormalizer's defaults do. */
	if (string_is(n, "type", "BertNormalizer") && bool_of(n, "clean_text", true) == 1 &&
	    bool_of(n, "handle_chinese_chars", true) == 1 && bool_of(n, "lowercase", true) == 1 &&
	    bool_of(n, "strip_accents", true) == 1)
		return true;
	return unsupported(w, n, "the core's WordPiece always cleans text, lower-cases and strips "
				 "accents");
}

static bool bert_pre_tokenizer(struct walk *w, const cJSON *p)
{
	if (string_is(p, "type", "BertPreTokenizer"))
		return true;
	return unsupported(w, p, "the core's WordPiece cuts words as BertPreTokenizer");
}

static bool bert_decoder(struct walk *w, const cJSON *d)
{
	if (string_is(d, "type", "WordPiece"))
		return true;
	return unsupported(w, d, "not WordPiece's decoder");
}

bool st_pipeline_bert(const loom_host *host, const char *path, const cJSON *tokenizer,
		      st_pipeline *out)
{
	struct walk w = {.host = host, .path = path, .out = out};
	*out = (st_pipeline){0};
	const cJSON *norm = cJSON_GetObjectItemCaseSensitive(tokenizer, "normalizer");
	if (norm == NULL || cJSON_IsNull(norm)) {
		host->set_error("%s: a WordPiece tokenizer without BertNormalizer: the core's always "
				"lower-cases and strips accents", path);
		return false;
	}
	return walk_part(&w, tokenizer, "normalizer", "normalizers", bert_normalizer) &&
	       walk_part(&w, tokenizer, "pre_tokenizer", "pretokenizers", bert_pre_tokenizer) &&
	       walk_part(&w, tokenizer, "decoder", "decoders", bert_decoder);
}
