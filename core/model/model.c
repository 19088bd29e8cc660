/* model.c - a model's lifetime: freeing everything loading made, and
 * adopting a file made in memory. */
#include "model/model.h"

#include "grammar/token_trie.h"

#include "runtime/format.h"

#include <stdlib.h>

void loom_model_adopt_file(loom_model *m, loom_model_file *file, int fmt, void *owner, void (*release)(void *))
{
	m->file = file;
	m->fmt = fmt;
	m->rope_style = m->contract->rope_style[fmt];
	m->adopted = owner;
	m->release_adopted = release;
}

void loom_model_free(loom_model *m)
{
	if (m == NULL)
		return;
	const loom_backend *be = &m->rt->backend;
	loom_token_trie_free(m->trie);
	pthread_mutex_destroy(&m->trie_lock);
	for (int i = 0; i < m->n_repacked; i++)
		loom_backend_release(be, &m->repacked[i].buf);
	free(m->repacked);
	loom_backend_release(be, &m->weights);
	for (size_t i = 0; i < m->n_owned; i++)
		loom_backend_release(be, &m->owned[i]);
	free(m->owned);
	for (size_t i = 0; i < m->n_copies; i++)
		free(m->copies[i].data);
	free(m->copies);
	for (size_t i = 0; i < m->n_names; i++)
		free(m->names[i]);
	free(m->names);
	free(m->layers);
	free(m->hp.rope_freq_factors);
	free(m->hp.rope_long_factors);
	free(m->hp.rope_short_factors);
	free(m->hp.swa_layers);
	free(m->hp.rope_layers);
	loom_vocab_free(m->vocab);
	loom_contract_free(m->contract);
	if (m->release_adopted != NULL)
		m->release_adopted(m->adopted);
	if (m->opened != NULL)
		loom_format_close(m->format, m->opened);
	free(m->arch);
	free(m->path);
	free(m);
}
