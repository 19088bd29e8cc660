#!/usr/bin/env bash
# Builds the fuzz targets' seed corpora under BUILD_DIR/fuzz-seeds/TARGET/,
# from the shared reference data ($LOOM_TEST_DATA, else ../shared), the
# repository's own YAML and small synthetic files (BUILD_DIR's
# fuzz_make_seeds). Nothing is copied into the source tree.
#
#     tests/fuzz/seeds.sh BUILD_DIR
#
# Without the shared data the targets that load a real model or vocabulary
# (fuzz_tokenizer, fuzz_serve_request, fuzz_chat_tools) get no seeds, and the others only
# synthetic ones.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: seeds.sh BUILD_DIR}" && pwd)
data=${LOOM_TEST_DATA:-$src/../shared}
seeds=$build/fuzz-seeds
rm -rf "$seeds"
for t in gguf safetensors hf_json contract plugins_yaml tokenizer model serve_request grammar chat_tools; do
	mkdir -p "$seeds/fuzz_$t"
done

# A seed file made of a selector byte (the targets' first byte) and text.
selected() { # DIR NAME BYTE TEXT
	{ printf "\\x$(printf %02x "$3")"; printf '%s' "$4"; } >"$1/$2"
}

"$build/tests/fuzz/fuzz_make_seeds" "$seeds/fuzz_model" "$seeds/fuzz_safetensors"
cp "$seeds"/fuzz_model/*.gguf "$seeds/fuzz_gguf/"

cp "$src"/arch/*.yaml "$seeds/fuzz_contract/"
cp "$src/plugins.yaml" "$seeds/fuzz_plugins_yaml/"
printf 'search_path: [a, /b]\narch_path: [arch]\nbackend: cpu-generic\nbackends:\n  - name: x\n    file: x.so\n    options: {threads: 2}\nformats: []\n' \
	>"$seeds/fuzz_plugins_yaml/options.yaml"

printf '{"metadata": {"total_size": 48}, "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", "model.norm.weight": "model-00001-of-00002.safetensors"}}' \
	>"$seeds/fuzz_safetensors/model.safetensors.index.json"
printf '{"model_type": "llama", "hidden_size": 64, "rope_scaling": {"type": "linear", "factor": 2.0}, "eos_token_id": [1, 2], "architectures": ["LlamaForCausalLM"]}' \
	>"$seeds/fuzz_hf_json/config-synthetic.json"

serve=$seeds/fuzz_serve_request
selected "$serve" completion 0 '{"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.5, "top_k": 40, "top_p": 0.9, "min_p": 0.05, "seed": 7, "stop": ["\n", "end"], "logprobs": 2, "stream": true, "stream_options": {"include_usage": true}}'
selected "$serve" completion-tokens 0 '{"prompt": [1, 2, 3], "echo": false, "repeat_penalty": 1.1}'
selected "$serve" structured 1 '{"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true, "schema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}, "s": {"type": "string", "pattern": "^[a-z]+$"}}, "required": ["n"]}}}, "logit_bias": {"5": -100, "7": 2.5}}'
selected "$serve" json-object 0 '{"prompt": "x", "response_format": {"type": "json_object"}}'
selected "$serve" chat 1 '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": null}], "max_completion_tokens": 4, "logprobs": true, "top_logprobs": 3}'
selected "$serve" embedding 2 '{"input": ["a tale", [1, 2, 3]], "encoding_format": "base64", "dimensions": 64}'
selected "$serve" tokenize 3 '{"content": "Once upon a time <s>", "add_special": true}'
selected "$serve" detokenize 4 '{"tokens": [1, 400, 511]}'

selected "$serve" tools 1 '{"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Oslo\"}"}}]}, {"role": "tool", "tool_call_id": "abcDEF123", "content": "12"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"location": {"type": "string", "maxLength": 9}}, "required": ["location"]}}}, {"type": "function", "function": {"name": "get_time"}}], "tool_choice": "required", "parallel_tool_calls": false}'
selected "$serve" tools-named 1 '{"messages": [{"role": "user", "content": "Time?"}], "tools": [{"type": "function", "function": {"name": "get_time", "description": "now"}}], "tool_choice": {"type": "function", "function": {"name": "get_time"}}, "stream": true}'

ct=$seeds/fuzz_chat_tools
conversation='[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Oslo\"}"}}, {"id": "xyz789QRS", "type": "function", "function": {"name": "get_time", "arguments": {}}}]}, {"role": "tool", "tool_call_id": "abcDEF123", "content": "12"}, {"role": "tool", "tool_call_id": "xyz789QRS", "content": "10:42"}, {"role": "user", "content": "Thanks"}]'
tools='[{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "City"}, "unit": {"type": "string", "enum": ["c", "f"]}, "days": {"type": "array", "items": {"type": "integer"}}}, "required": ["location"]}}}, {"type": "function", "function": {"name": "get_time"}}]'
for k in 0 1 2 3 4 5 6 7; do
	{ printf "\\x0$k%s" "$conversation"; printf '\0%s' "$tools"; } >"$ct/render-$k"
done
selected "$ct" hermes 128 $'\x03Let me see.<tool_call>\n{"name": "get_weather", "arguments": {"location": "a } \\" b"}}\n</tool_call>\n<tool_call>{"arguments": {}, "name": "t"}</tool_call>'
selected "$ct" mistral 130 $'\x05[TOOL_CALLS] [{"name": "a", "arguments": {"x": [1, {"y": null}]}}, {"name": "b", "arguments": "{}"}]'
selected "$ct" llama3 129 $'\x02 {"name": "f", "parameters": {"q": "\\u00e9"}}'
selected "$ct" generic 131 $'\x07{"tool_calls": [{"name": "f", "arguments": {"a": 1}}]}'
selected "$ct" mistral-v11 134 $'\x04[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"location": "a } [ARGS] b"}[TOOL_CALLS]get_time[ARGS]{}'
selected "$ct" mistral-v13 135 $'\x02Sure.[TOOL_CALLS] f [ARGS] {"q": [1, {"x": null}]}[TOOL_CALLS]g[ARGS]{}'

gr=$seeds/fuzz_grammar
selected "$gr" json-gbnf 0 $'root ::= "{" ws (pair ("," ws pair)*)? "}"
pair ::= "\"" [a-z]* "\":" ws ("true" | [0-9]+ | [^\x00-\x1F]{1,3})
ws ::= [ \n]{0,3} # c
'
selected "$gr" repeat-gbnf 0 $'root ::= ("ab"{2,4} | [^a-c\u00e9]+)* x?
x ::= . "\xff"
'
selected "$gr" tokens 0 $'root ::= [a-z]+ <[7]> "{" [0-9]* "}" (<[40]> root)?\n'
selected "$gr" schema 1 '{"type":"object","properties":{"n":{"type":"integer","minimum":-3,"maximum":250},"s":{"type":"string","pattern":"^[a-z]+(-[0-9]{2})?$"},"t":{"$ref":"#/$defs/t"}},"required":["n"],"$defs":{"t":{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}]}}}'
selected "$gr" schema-formats 1 '{"type":"array","prefixItems":[{"type":"string","format":"date-time"},{"enum":[1,"a",null]}],"items":{"type":"number","minimum":0,"maximum":1}}'

tok=$seeds/fuzz_tokenizer
texts=("Hello world" " the quick  brown fox" "<s>Once</s> upon" $'tabs\tand\nnewlines\r\n' "héllo wörld 世界 🙂"
	"[CLS] what's this? [SEP]" "12345 3.14159 -7e10" "' ''' \"quoted\"")
for vocab in 0 1 2; do
	for i in "${!texts[@]}"; do
		selected "$tok" "v$vocab-$i" $((vocab + 0x30 * (i % 2))) "${texts[$i]}"
	done
done

if [ ! -d "$data/models" ] || [ ! -d "$data/golden/tokenizer" ]; then
	echo "seeds.sh: no shared data at $data: synthetic seeds only" >&2
	exit 0
fi
models=$data/models
cp "$models/synthetic/llama-q2_k.gguf" "$models/synthetic/llama-q4_k_m.gguf" "$models/synthetic/llama-q4_0.gguf" \
	"$seeds/fuzz_model/"
cp "$models/stories260K-q4_k_m.gguf" "$models/synthetic/llama-q2_k.gguf" "$data/golden/tokenizer/ggml-vocab-bert-bge.gguf" \
	"$seeds/fuzz_gguf/"
for dir in stories260K-hf stories-llama-d256-hf; do
	for f in "$models/$dir"/*.json; do
		cp "$f" "$seeds/fuzz_hf_json/$dir-$(basename "$f")"
	done
done
# The start of each vocabulary's reference inputs, its cases run together.
for vocab in llama-spm:0 gpt-2:1 bert-bge:2; do
	inp=$data/golden/tokenizer/ggml-vocab-${vocab%:*}.gguf.inp
	selected "$tok" "golden-${vocab%:*}" "${vocab#*:}" "$(head -c 4096 "$inp")"
done
