/*
 * contract_text_model.h - a contract's text_model section
 * (contract_text_model.c): the spellings of a family's multimodal
 * checkpoints' text model, added to its safetensors section's.
 */
#ifndef LOOM_CONTRACT_TEXT_MODEL_H
#define LOOM_CONTRACT_TEXT_MODEL_H

#include "model/contract.h"
#include "runtime/yaml_doc.h"

/* Adds node's alternatives to c's safetensors hyperparameter keys and
 * tensor names, parsed already; an error names the file and line. */
loom_status loom_contract_text_model(loom_yaml *y, yaml_node_t *node, loom_contract *c);

#endif
