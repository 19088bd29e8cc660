/* hparams.h - reading a model's hyperparameters. */
#ifndef LOOM_HPARAMS_H
#define LOOM_HPARAMS_H

#include "model/model.h"

/* Fills m->hp from m's file, in contract section m->fmt, and the
 * contract's defaults; errors name the hyperparameter and its key. */
loom_status loom_model_read_hparams(loom_model *m);

#endif
