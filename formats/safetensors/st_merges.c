/*
 * st_merges.c - BPE merges from tokenizer.json (st_merges.h).
 *
 * Hugging Face's BPE starts a word as one symbol per character and, while
 * some neighbouring pair is listed in the merges, merges the pair listed
 * first (lowest rank), the leftmost where one pair occurs twice. A
 * byte-level vocabulary ("gpt2") keeps that list as tokenizer.ggml.merges
 * and the core applies it the same way.
 *
 * A SentencePiece-style vocabulary ("llama") has no merge list in GGUF: the
 * core merges any neighbouring pair whose concatenation is a token, the one
 * whose token scores highest first, the leftmost on equal scores. Giving
 * each token the score -(rank of the first merge that makes it), and every
 * token no merge makes 0, reproduces Hugging Face's BPE exactly when
 *
 *  (a) every pair that the core could merge is a merge: for each token t
 *      and each way to cut t into two symbols the text can hold (single
 *      characters and tokens some merge makes), that pair is listed; and
 *  (b) the merges that make one token have consecutive ranks.
 *
 * By (a) the two sides consider the same pairs at every step. Distinct
 * tokens get distinct scores, so by (b) "highest score" orders pairs of
 * different tokens as "lowest rank" does. Two pairs that make the same
 * token tie in the core; for the same pair at two places both sides take
 * the leftmost. The one case left is two different pairs making the same
 * token that overlap, such as "ab"+"a" and "a"+"ba" around one "a" for
 * "aba": the core takes the leftmost and Hugging Face the lower rank.
 * SentencePiece itself takes the leftmost, as llama.cpp does for a GGUF.
 *
 * A tokenizer.json converted from a SentencePiece model (transformers'
 * SentencePieceExtractor: every split of every piece into two pieces,
 * ordered by the piece's score) meets (a) and (b). One whose merges were
 * learnt by Hugging Face's trainer lists one split per token and breaks
 * (a): the core would merge pairs Hugging Face never merges, so that is an
 * error. Breaking (b) changes the result only where pairs of the two
 * tokens compete, so it is a warning.
 */
#include "st_merges.h"
#include "st_plugin.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Scores are F32: ranks up to 2^24 are exact. */
#define MAX_SCORED_MERGES (1 << 24)

/* ------------------------------------------------------------------------ */
/* One merge                                                                */

struct merge {
	const char *left, *right;
	size_t left_len, right_len;
};

/* Merge i as "left right" (one space) or ["left", "right"]. */
static bool parse_merge(const loom_host *host, const char *path, const cJSON *item, size_t i,
			struct merge *m)
{
	if (cJSON_IsString(item)) {
		const char *s = item->valuestring, *space = strchr(s, ' ');
		if (space != NULL && strchr(space + 1, ' ') == NULL) {
			*m = (struct merge){.left = s, .left_len = (size_t)(space - s),
					    .right = space + 1, .right_len = strlen(space + 1)};
			return true;
		}
	} else if (cJSON_IsArray(item) && cJSON_GetArraySize(item) == 2 &&
		   cJSON_IsString(item->child) && cJSON_IsString(item->child->next)) {
		const char *l = item->child->valuestring, *r = item->child->next->valuestring;
		*m = (struct merge){.left = l, .left_len = strlen(l), .right = r,
				    .right_len = strlen(r)};
		return true;
	}
	host->set_error("%s: model.merges[%zu] is neither \"left right\" nor [\"left\", \"right\"]",
			path, i);
	return false;
}

/* The ids of a merge's parts and of what it makes, all of which Hugging
 * Face requires to be tokens. buf is scratch for the concatenation. */
static bool resolve_merge(const loom_host *host, const char *path, const st_vocab *v, size_t i,
			  const struct merge *m, char **buf, size_t *cap, int32_t ids[3])
{
	size_t len = m->left_len + m->right_len;
	if (len + 1 > *cap) {
		char *p = realloc(*buf, len + 1);
		if (p == NULL) {
			host->set_error("%s: out of memory for the merges", path);
			return false;
		}
		*buf = p;
		*cap = len + 1;
	}
	memcpy(*buf, m->left, m->left_len);
	memcpy(*buf + m->left_len, m->right, m->right_len);
	ids[0] = st_vocab_find(v, m->left, m->left_len);
	ids[1] = st_vocab_find(v, m->right, m->right_len);
	ids[2] = st_vocab_find(v, *buf, len);
	for (int k = 0; k < 3; k++) {
		if (ids[k] >= 0)
			continue;
		const char *what = k == 0 ? m->left : k == 1 ? m->right : *buf;
		int what_len = (int)(k == 0 ? m->left_len : k == 1 ? m->right_len : len);
		host->set_error("%s: model.merges[%zu] ('%.*s' '%.*s'): '%.*s' is not in the vocabulary",
				path, i, (int)m->left_len, m->left, (int)m->right_len, m->right,
				what_len > 80 ? 80 : what_len, what);
		return false;
	}
	return true;
}

/* The merges' first element and count; model.merges may be absent. */
static bool merge_list(const loom_host *host, const char *path, const cJSON *merges,
		       const cJSON **first, size_t *n)
{
	*first = NULL;
	*n = 0;
	if (merges == NULL || cJSON_IsNull(merges))
		return true;
	if (!cJSON_IsArray(merges)) {
		host->set_error("%s: model.merges is not an array", path);
		return false;
	}
	*n = (size_t)cJSON_GetArraySize(merges);
	*first = merges->child;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Pairs that are merges                                                    */

struct pair_set {
	uint64_t *keys; /* left << 32 | right; UINT64_MAX free */
	size_t mask;
};

static uint64_t pair_key(int32_t left, int32_t right)
{
	return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static size_t pair_slot(const struct pair_set *s, uint64_t key)
{
	uint64_t h = key * 0x9e3779b97f4a7c15u;
	size_t i = (size_t)(h >> 20) & s->mask;
	while (s->keys[i] != UINT64_MAX && s->keys[i] != key)
		i = (i + 1) & s->mask;
	return i;
}

static bool pair_set_init(struct pair_set *s, size_t n)
{
	size_t size = 16;
	while (size < 2 * n)
		size *= 2;
	s->keys = malloc(size * sizeof(*s->keys));
	s->mask = size - 1;
	if (s->keys != NULL)
		memset(s->keys, 0xff, size * sizeof(*s->keys));
	return s->keys != NULL;
}

static void pair_set_add(struct pair_set *s, int32_t left, int32_t right)
{
	uint64_t key = pair_key(left, right);
	s->keys[pair_slot(s, key)] = key;
}

static bool pair_set_has(const struct pair_set *s, int32_t left, int32_t right)
{
	uint64_t key = pair_key(left, right);
	return s->keys[pair_slot(s, key)] == key;
}

/* ------------------------------------------------------------------------ */
/* Scores                                                                   */

/* Bytes of the UTF-8 character that starts with lead (1 for a stray byte). */
static size_t utf8_char_len(unsigned char lead)
{
	static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
	return len[lead >> 4];
}

struct scoring {
	const loom_host *host;
	const char *path;
	st_vocab *v;
	int32_t *first; /* rank of the first merge making each token, or -1 */
	struct pair_set pairs;
};

/* Whether text[0 .. len) can be a symbol while the core merges: one
 * character, or a token some merge makes. *id: its token or -1. */
static bool is_symbol(const struct scoring *s, const char *text, size_t len, int32_t *id)
{
	*id = st_vocab_find(s->v, text, len);
	if (len == utf8_char_len((unsigned char)text[0]))
		return true;
	return *id >= 0 && s->first[*id] >= 0;
}

/* Condition (a) for token t. */
static bool check_splits(const struct scoring *s, int32_t t)
{
	const char *text = s->v->text[t];
	size_t len = s->v->len[t];
	for (size_t k = utf8_char_len((unsigned char)text[0]); k < len;
	     k += utf8_char_len((unsigned char)text[k])) {
		int32_t left, right;
		if (!is_symbol(s, text, k, &left) || !is_symbol(s, text + k, len - k, &right))
			continue;
		if (left >= 0 && right >= 0 && pair_set_has(&s->pairs, left, right))
			continue;
		s->host->set_error("%s: token %" PRId32 " '%.*s' is '%.*s' + '%.*s', which model.merges "
				   "does not list; GGUF's SentencePiece-style tokenizer would merge them, "
				   "so it cannot reproduce this BPE (merges learnt one per token rather "
				   "than converted from a SentencePiece model)",
				   s->path, t, (int)(len > 80 ? 80 : len), text, (int)k, text,
				   (int)(len - k), text + k);
		return false;
	}
	return true;
}

/* Records every merge's pair and the rank of the first making each token;
 * warns once where the merges of one token are not consecutive (b). */
static bool rank_merges(struct scoring *s, const cJSON *item, size_t n)
{
	char *buf = NULL;
	size_t cap = 0, warned = 0;
	int32_t *last = malloc((size_t)s->v->n * sizeof(*last) + 1);
	bool ok = last != NULL;
	if (!ok)
		s->host->set_error("%s: out of memory for the merges", s->path);
	for (size_t i = 0; ok && i < n; i++, item = item->next) {
		struct merge m;
		int32_t ids[3];
		ok = parse_merge(s->host, s->path, item, i, &m) &&
		     resolve_merge(s->host, s->path, s->v, i, &m, &buf, &cap, ids);
		if (!ok)
			break;
		pair_set_add(&s->pairs, ids[0], ids[1]);
		int32_t t = ids[2];
		if (s->first[t] < 0) {
			s->first[t] = (int32_t)i;
		} else if (last[t] != (int32_t)i - 1 && warned++ == 0) {
			s->host->log(LOOM_LOG_WARN, PLUGIN,
				     "%s: the merges making '%.*s' are not consecutive (ranks %" PRId32
				     " and %zu); where their pairs compete with the merges between, "
				     "tokens may differ from Hugging Face's",
				     s->path, (int)(s->v->len[t] > 80 ? 80 : s->v->len[t]),
				     s->v->text[t], last[t], i);
		}
		last[t] = (int32_t)i;
	}
	free(last);
	free(buf);
	return ok;
}

bool st_merges_to_scores(const loom_host *host, const char *path, const cJSON *merges,
			 st_vocab *v)
{
	size_t n;
	const cJSON *item;
	if (!merge_list(host, path, merges, &item, &n))
		return false;
	if (n > MAX_SCORED_MERGES) {
		host->set_error("%s: %zu merges are more than scores can order (%d)", path, n,
				MAX_SCORED_MERGES);
		return false;
	}
	struct scoring s = {.host = host, .path = path, .v = v};
	s.first = malloc((size_t)v->n * sizeof(*s.first) + 1);
	if (s.first == NULL || !pair_set_init(&s.pairs, n)) {
		free(s.first);
		host->set_error("%s: out of memory for %zu merges", path, n);
		return false;
	}
	for (int32_t t = 0; t < v->n; t++)
		s.first[t] = -1;
	bool ok = rank_merges(&s, item, n);
	for (int32_t t = 0; ok && t < v->n; t++)
		if (v->type[t] != ST_TOKEN_UNUSED)
			ok = check_splits(&s, t);
	for (int32_t t = 0; ok && t < v->n; t++)
		v->score[t] = s.first[t] >= 0 ? -(float)s.first[t] : 0.0f;
	free(s.pairs.keys);
	free(s.first);
	return ok;
}

/* ------------------------------------------------------------------------ */
/* The merge list                                                           */

bool st_merges_to_meta(const loom_host *host, const char *path, const cJSON *merges,
		       const st_vocab *v, st_meta *meta)
{
	size_t n;
	const cJSON *item;
	if (!merge_list(host, path, merges, &item, &n))
		return false;
	loom_string *list = malloc((n ? n : 1) * sizeof(*list));
	char *buf = NULL, *text = NULL;
	size_t cap = 0, n_out = 0, total = 0;
	bool ok = list != NULL;
	if (!ok)
		host->set_error("%s: out of memory for %zu merges", path, n);
	/* First the total size, so the strings can live in one block. */
	size_t i = 0;
	for (const cJSON *it = item; ok && it != NULL; it = it->next, i++) {
		struct merge m;
		ok = parse_merge(host, path, it, i, &m);
		if (ok)
			total += m.left_len + m.right_len + 1;
	}
	if (ok && (text = malloc(total + 1)) == NULL) {
		host->set_error("%s: out of memory for %zu merges", path, n);
		ok = false;
	}
	size_t off = 0;
	for (i = 0; ok && i < n; i++, item = item->next) {
		struct merge m;
		int32_t ids[3];
		ok = parse_merge(host, path, item, i, &m);
		/* A part holding a space can never match: byte-level symbols
		 * spell a space as "Ġ". GGUF's "left right" could not say it
		 * either. */
		if (!ok || memchr(m.left, ' ', m.left_len) != NULL ||
		    memchr(m.right, ' ', m.right_len) != NULL)
			continue;
		ok = resolve_merge(host, path, v, i, &m, &buf, &cap, ids);
		if (!ok)
			break;
		list[n_out++] = (loom_string){.len = m.left_len + 1 + m.right_len, .data = text + off};
		memcpy(text + off, m.left, m.left_len);
		text[off + m.left_len] = ' ';
		memcpy(text + off + m.left_len + 1, m.right, m.right_len);
		off += m.left_len + 1 + m.right_len;
	}
	if (ok && !st_meta_set_array(meta, "tokenizer.ggml.merges", LOOM_META_STRING, list, n_out)) {
		host->set_error("%s: out of memory for %zu merges", path, n);
		ok = false;
	}
	free(text);
	free(buf);
	free(list);
	return ok;
}
