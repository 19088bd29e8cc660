/*
 * pretokenizer.c - the regular expressions that cut text into words before
 * byte-level BPE, chosen by the GGUF key tokenizer.ggml.pre.
 *
 * The table maps each name to the expressions llama.cpp (llama-vocab.cpp)
 * uses for it, in its order: each expression cuts the pieces the previous
 * ones left, and the text between two matches is a piece too, as in
 * llama.cpp's unicode_regex_split. Where llama.cpp rewrote a tokenizer.json
 * expression for std::regex (no (?i:...)), the rewritten one is used: it
 * matches the same text.
 *
 * The expressions run on PCRE2 in UTF mode with Unicode properties, so
 * \p{L}, \p{N} and \p{P} mean what they mean in the Hugging Face tokenizers;
 * \s is respelled as Unicode's White_Space, which they use too.
 * PCRE2_MATCH_INVALID_UTF lets invalid UTF-8 through unharmed: it never
 * matches, so its bytes stay in pieces of their own and byte-level BPE
 * still spells them exactly.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "text/pretokenizer.h"

#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "text/unicode.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Expressions                                                              */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

/* Llama 3's expression with its case-insensitive contractions spelled out. */
#define RE_LLAMA3                                                                          \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
	"\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Qwen2's: Llama 3's with single digits. */
#define RE_QWEN2                                                                           \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
	"\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Chinese, Japanese and Korean runs (DeepSeek). */
#define RE_CJK_RUN "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

/* DeepSeek LLM's cased letters, as its tokenizer.json lists them. */
#define RE_DEEPSEEK_LETTERS                                                                        \
	"\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"               \
	"\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}"    \
	"\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"            \
	"\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"     \
	"\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}" \
	"\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}" \
	"\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"   \
	"\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}" \
	"\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"            \
	"\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"   \
	"\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"            \
	"\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}"  \
	"\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}" \
	"\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"                  \
	"\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"            \
	"\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"

/* GPT-4o's: an upper-case run, then lower case, then a contraction. */
#define RE_GPT4O_WORD                                                                     \
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"                   \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"                           \
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"                   \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"                           \
	"\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Each list ends with NULL. */
static const char *const re_default[] = {
	"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL,
};
static const char *const re_gpt2[] = {RE_GPT2, NULL};
static const char *const re_llama3[] = {RE_LLAMA3, NULL};
static const char *const re_qwen2[] = {RE_QWEN2, NULL};
static const char *const re_starcoder[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const re_falcon[] = {
	"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL,
};
static const char *const re_deepseek_llm[] = {
	"[\r\n]",
	RE_DEEPSEEK_LETTERS,
	"\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
	"\\s+$",
	RE_CJK_RUN,
	"\\p{N}+",
	NULL,
};
static const char *const re_deepseek_coder[] = {
	"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK_RUN, "\\p{N}", NULL,
};
static const char *const re_deepseek3[] = {
	"\\p{N}{1,3}",
	"[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
	" ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
	NULL,
};
/* Poro, BLOOM: words with their leading space, punctuation on its own. */
#define RE_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
static const char *const re_poro[] = {RE_PORO, NULL};
static const char *const re_viking[] = {RE_PORO, "\\p{N}", NULL};
static const char *const re_tekken[] = {
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
	"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
	"\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	NULL,
};
static const char *const re_gpt4o[] = {RE_GPT4O_WORD, NULL};
static const char *const re_chameleon[] = {
	"<sentinel:[0-9]+>",
	"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
	"([\\t\\n]|    |  )",
	"\\p{N}",
	"[\\p{P}!-/:-@\\[-`{-~]",
	RE_GPT2,
	NULL,
};
static const char *const re_bailingmoe[] = {
	"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
	" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
	NULL,
};
static const char *const re_seed_coder[] = {
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
	"\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	NULL,
};

/* ------------------------------------------------------------------------ */
/* Names                                                                    */

static const struct pretok_def {
	const char *name;
	const char *const *exprs;
	unsigned flags;
} pretok_defs[] = {
	{"default", re_default, 0},
	{"gpt-2", re_gpt2, 0},
	{"phi-2", re_gpt2, 0},
	{"mpt", re_gpt2, 0},
	{"olmo", re_gpt2, 0},
	{"jais", re_gpt2, 0},
	{"gigachat", re_gpt2, 0},
	{"trillion", re_gpt2, 0},
	{"granite-docling", re_gpt2, 0},
	{"exaone4", re_gpt2, 0},
	{"a.x-4.0", re_gpt2, 0},
	{"mellum", re_gpt2, 0},
	{"roberta-bpe", re_gpt2, 0},
	{"jina-es", re_gpt2, 0},
	{"jina-de", re_gpt2, 0},
	{"jina-v1-en", re_gpt2, 0},
	{"jina-v2-es", re_gpt2, LOOM_PRETOK_LSTRIP_MASK},
	{"jina-v2-de", re_gpt2, LOOM_PRETOK_LSTRIP_MASK},
	{"jina-v2-code", re_gpt2, LOOM_PRETOK_LSTRIP_MASK},
	{"llama3", re_llama3, LOOM_PRETOK_IGNORE_MERGES | LOOM_PRETOK_ADD_BOS},
	{"llama-v3", re_llama3, LOOM_PRETOK_IGNORE_MERGES | LOOM_PRETOK_ADD_BOS},
	{"llama-bpe", re_llama3, LOOM_PRETOK_IGNORE_MERGES | LOOM_PRETOK_ADD_BOS},
	{"falcon3", re_llama3, LOOM_PRETOK_IGNORE_MERGES | LOOM_PRETOK_ADD_BOS},
	{"falcon-h1", re_llama3, LOOM_PRETOK_IGNORE_MERGES | LOOM_PRETOK_ADD_BOS},
	{"pixtral", re_llama3, LOOM_PRETOK_IGNORE_MERGES | LOOM_PRETOK_ADD_BOS},
	{"dbrx", re_llama3, 0},
	{"smaug-bpe", re_llama3, 0},
	{"glm4", re_llama3, LOOM_PRETOK_NO_BOS},
	{"chatglm-bpe", re_llama3, LOOM_PRETOK_NO_BOS},
	{"qwen2", re_qwen2, 0},
	{"deepseek-r1-qwen", re_qwen2, 0},
	{"megrez", re_qwen2, 0},
	{"stablelm2", re_qwen2, 0},
	{"hunyuan", re_qwen2, 0},
	{"grok-2", re_qwen2, 0},
	{"starcoder", re_starcoder, 0},
	{"refact", re_starcoder, 0},
	{"command-r", re_starcoder, 0},
	{"smollm", re_starcoder, 0},
	{"codeshell", re_starcoder, 0},
	{"exaone", re_starcoder, 0},
	{"minerva-7b", re_starcoder, 0},
	{"falcon", re_falcon, 0},
	{"deepseek-llm", re_deepseek_llm, 0},
	{"deepseek-coder", re_deepseek_coder, 0},
	{"deepseek-v3", re_deepseek3, 0},
	{"hunyuan-dense", re_deepseek3, 0},
	{"poro-chat", re_poro, 0},
	{"bloom", re_poro, 0},
	{"gpt3-finnish", re_poro, 0},
	{"viking", re_viking, 0},
	{"tekken", re_tekken, LOOM_PRETOK_IGNORE_MERGES | LOOM_PRETOK_ADD_BOS},
	{"gpt-4o", re_gpt4o, 0},
	{"llama4", re_gpt4o, 0},
	{"minimax-m2", re_gpt4o, 0},
	{"chameleon", re_chameleon, LOOM_PRETOK_ADD_BOS},
	{"bailingmoe", re_bailingmoe, 0},
	{"bailingmoe2", re_bailingmoe, 0},
	{"llada-moe", re_bailingmoe, 0},
	{"seed-coder", re_seed_coder, 0},
};

struct loom_pretokenizer {
	const struct pretok_def *def;
	pcre2_code **code; /* one per expression */
	int n_code;
};

static const struct pretok_def *find_def(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(pretok_defs) / sizeof(pretok_defs[0]); i++)
		if (strlen(pretok_defs[i].name) == len && memcmp(pretok_defs[i].name, name, len) == 0)
			return &pretok_defs[i];
	return NULL;
}

/* Unicode's White_Space. PCRE2's \s adds U+180E, which Unicode stopped
 * counting as a space in 6.3 and the other tokenizers do not count. */
#define WHITE_SPACE \
	"\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* expr with \s and \S spelled out as classes of WHITE_SPACE (malloc'd; NULL
 * if out of memory). Inside a class \s adds the members; no expression has
 * \S inside a class, which would stay PCRE2's. */
static char *spell_white_space(const char *expr)
{
	size_t len = strlen(expr), extra = sizeof(WHITE_SPACE) + 3;
	char *out = malloc(len * extra + 1), *o = out;
	bool in_class = false;
	if (out == NULL)
		return NULL;
	for (const char *p = expr; *p != '\0'; p++) {
		if (p[0] == '\\' && (p[1] == 's' || (p[1] == 'S' && !in_class))) {
			o += sprintf(o, in_class ? "%s" : p[1] == 's' ? "[%s]" : "[^%s]", WHITE_SPACE);
			p++;
		} else if (p[0] == '\\' && p[1] != '\0') {
			*o++ = *p++;
			*o++ = *p;
		} else {
			if (*p == '[')
				in_class = true;
			else if (*p == ']')
				in_class = false;
			*o++ = *p;
		}
	}
	*o = '\0';
	return out;
}

static loom_status compile_expr(const char *expr, pcre2_code **out)
{
	int err;
	PCRE2_SIZE at;
	/* ECMAScript's $ (std::regex in llama.cpp) is the end of the text only. */
	uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
	char *spelled = spell_white_space(expr);
	if (spelled == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for the pre-tokenizer");
	*out = pcre2_compile((PCRE2_SPTR)spelled, PCRE2_ZERO_TERMINATED, opts, &err, &at, NULL);
	if (*out == NULL) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(err, msg, sizeof(msg));
		loom_error(LOOM_ERR_UNSUPPORTED, "pre-tokenizer expression '%s': %s at offset %zu",
			   spelled, (const char *)msg, (size_t)at);
		free(spelled);
		return LOOM_ERR_UNSUPPORTED;
	}
	free(spelled);
	/* Without JIT support (some platforms) matching still works, slower. */
	pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE);
	return LOOM_OK;
}

loom_status loom_pretokenizer_create(const char *name, size_t len, loom_pretokenizer **out)
{
	*out = NULL;
	const struct pretok_def *def = name != NULL ? find_def(name, len) : find_def("default", 7);
	if (def == NULL)
		return loom_error(LOOM_ERR_UNSUPPORTED,
				  "pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported",
				  (int)(len > 64 ? 64 : len), name);
	loom_pretokenizer *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for the pre-tokenizer");
	p->def = def;
	int n = 0;
	while (def->exprs[n] != NULL)
		n++;
	p->code = calloc((size_t)n, sizeof(*p->code));
	loom_status st = p->code != NULL ? LOOM_OK
					 : loom_error(LOOM_ERR_NO_MEMORY, "out of memory for the pre-tokenizer");
	for (int i = 0; i < n && st == LOOM_OK; i++) {
		st = compile_expr(def->exprs[i], &p->code[i]);
		if (st == LOOM_OK)
			p->n_code++;
	}
	if (st != LOOM_OK) {
		loom_pretokenizer_free(p);
		return st;
	}
	*out = p;
	return LOOM_OK;
}

void loom_pretokenizer_free(loom_pretokenizer *p)
{
	if (p == NULL)
		return;
	for (int i = 0; i < p->n_code; i++)
		pcre2_code_free(p->code[i]);
	free(p->code);
	free(p);
}

unsigned loom_pretokenizer_flags(const loom_pretokenizer *p)
{
	return p->def->flags;
}

/* ------------------------------------------------------------------------ */
/* Splitting                                                                */

static loom_status span_push(loom_span_vec *v, size_t off, size_t len)
{
	if (len == 0)
		return LOOM_OK;
	loom_span *p = loom_array_grow(v->data, &v->cap, v->n + 1, sizeof(*p));
	if (p == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenize: out of memory");
	v->data = p;
	v->data[v->n++] = (loom_span){.off = off, .len = len};
	return LOOM_OK;
}

/* The next match of code in subject[0 .. len) at or after start: 1 with
 * [*mstart, *mend), 0 if none. The JIT's stack is small; a match that
 * outgrows it is run again by the interpreter, whose memory is on the heap. */
static int next_match(const pcre2_code *code, const char *subject, size_t len, size_t start,
		      pcre2_match_data *md, size_t *mstart, size_t *mend, loom_status *st)
{
	int rc = pcre2_match(code, (PCRE2_SPTR)subject, len, start, 0, md, NULL);
	if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
		rc = pcre2_match(code, (PCRE2_SPTR)subject, len, start, PCRE2_NO_JIT, md, NULL);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc < 0) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(rc, msg, sizeof(msg));
		*st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "pre-tokenizer: %s", (const char *)msg);
		return 0;
	}
	const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
	*mstart = ov[0];
	*mend = ov[1];
	return 1;
}

/* Bytes of the UTF-8 sequence at subject[at] (1 for a stray byte), within
 * the subject. */
static size_t utf8_len(const char *subject, size_t len, size_t at)
{
	size_t n = loom_utf8_seq_len((unsigned char)subject[at]);
	return n < len - at ? n : len - at;
}

/* Cuts piece s of text by code into matches and the gaps between them. */
static loom_status split_piece(const pcre2_code *code, const char *text, loom_span s,
			       pcre2_match_data *md, loom_span_vec *out)
{
	const char *subject = text + s.off;
	size_t pos = 0, gap = 0, ms, me;
	loom_status st = LOOM_OK;

	while (pos < s.len && st == LOOM_OK && next_match(code, subject, s.len, pos, md, &ms, &me, &st)) {
		if (me == ms) {
			/* No expression here matches empty text; should one, the
			 * character there stays in the gap. */
			pos = ms + utf8_len(subject, s.len, ms);
			continue;
		}
		st = span_push(out, s.off + gap, ms - gap);
		if (st == LOOM_OK)
			st = span_push(out, s.off + ms, me - ms);
		pos = gap = me;
	}
	if (st == LOOM_OK)
		st = span_push(out, s.off + gap, s.len - gap);
	return st;
}

loom_status loom_pretokenizer_split(const loom_pretokenizer *p, const char *text, size_t len,
				    loom_span_vec *out)
{
	loom_span_vec next = {0};
	loom_status st = LOOM_OK;
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	if (md == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenize: out of memory");
	out->n = 0;
	st = span_push(out, 0, len);
	for (int i = 0; i < p->n_code && st == LOOM_OK; i++) {
		next.n = 0;
		for (size_t j = 0; j < out->n && st == LOOM_OK; j++)
			st = split_piece(p->code[i], text, out->data[j], md, &next);
		loom_span_vec t = *out;
		*out = next;
		next = t;
	}
	free(next.data);
	pcre2_match_data_free(md);
	return st;
}
