/* api_structs.c - loom.h's structs as struct_size.c reads and writes them:
 * each named with the last field of its first version (libloom 1.0), the
 * smallest a host may hand over. A field appended later leaves these as
 * they are. */
#include "runtime/struct_size.h"

const loom_struct_desc loom_runtime_params_desc = LOOM_STRUCT_DESC(loom_runtime_params, compute_on);
const loom_struct_desc loom_model_params_desc = LOOM_STRUCT_DESC(loom_model_params, quantize);
const loom_struct_desc loom_quantize_params_desc = LOOM_STRUCT_DESC(loom_quantize_params, progress_user);
const loom_struct_desc loom_convert_params_desc = LOOM_STRUCT_DESC(loom_convert_params, backend_layout);
const loom_struct_desc loom_context_params_desc = LOOM_STRUCT_DESC(loom_context_params, kv_type);
const loom_struct_desc loom_sampler_params_desc = LOOM_STRUCT_DESC(loom_sampler_params, frequency_penalty);
const loom_struct_desc loom_generate_params_desc = LOOM_STRUCT_DESC(loom_generate_params, grammar);
const loom_struct_desc loom_generator_params_desc = LOOM_STRUCT_DESC(loom_generator_params, n_logprobs);
const loom_struct_desc loom_plugin_info_desc = LOOM_STRUCT_DESC(loom_plugin_info, why);
const loom_struct_desc loom_device_info_desc = LOOM_STRUCT_DESC(loom_device_info, memory_free);
const loom_struct_desc loom_tensor_info_desc = LOOM_STRUCT_DESC(loom_tensor_info, file_offset);
const loom_struct_desc loom_batch_desc = LOOM_STRUCT_DESC(loom_batch, logits);
const loom_struct_desc loom_profile_desc = LOOM_STRUCT_DESC(loom_profile, by_node);
const loom_struct_desc loom_generate_stats_desc = LOOM_STRUCT_DESC(loom_generate_stats, n_discarded);
const loom_struct_desc loom_generated_desc = LOOM_STRUCT_DESC(loom_generated, top_logprob);
const loom_struct_desc loom_reply_parts_desc = LOOM_STRUCT_DESC(loom_reply_parts, n_reasoning);
const loom_struct_desc loom_chat_message_desc = LOOM_STRUCT_DESC(loom_chat_message, content);
const loom_struct_desc loom_tool_call_desc = LOOM_STRUCT_DESC(loom_tool_call, done);
