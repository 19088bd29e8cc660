// agent_clients.mjs - the clients agent frameworks are built on, against
// `loom serve`: structured outputs and tool calls as each asks for them.
//
//   node agent_clients.mjs PORT MODEL
//
// - openai: chat.completions.parse with zodResponseFormat and with a
//   zodFunction tool, the .stream() helper (which throws on a malformed
//   tool-call delta) and runTools with a function it calls;
// - the Vercel AI SDK through its OpenAI-compatible provider: generateObject,
//   generateText and streamText with a tool;
// - LangChain.js's ChatOpenAI: withStructuredOutput and bindTools.
//
// Prints one JSON object with what each got; test_serve checks it. A client
// that throws (a reply it cannot read) fails the run. The bare imports
// resolve from the directory this file runs in: test_serve runs a copy in
// the build tree's node/, where scripts/test.sh installs the packages.
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { generateObject, generateText, streamText, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';

const [port, model] = process.argv.slice(2);
if (!port || !model) {
  console.error('usage: node agent_clients.mjs PORT MODEL');
  process.exit(2);
}
const baseURL = `http://127.0.0.1:${port}/v1`;
const limits = { temperature: 0, max_tokens: 200 };
const question = [{ role: 'user', content: 'What is the weather in Oslo?' }];

const Person = z.object({ name: z.string().max(12), age: z.number().int().min(0) });
const Weather = z.object({ location: z.string().max(20), unit: z.enum(['celsius', 'fahrenheit']) });
const weatherSchema = {
  type: 'object',
  properties: { location: { type: 'string', maxLength: 20 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['location', 'unit'],
  additionalProperties: false,
};
const getWeather = { name: 'get_weather', description: 'The weather in a city' };
const out = {};

// ---- openai ----
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
const parsed = await client.beta.chat.completions.parse({
  model, messages: question, response_format: zodResponseFormat(Person, 'person'), ...limits,
});
out.openai_parse = parsed.choices[0].message.parsed;

const toolParsed = await client.beta.chat.completions.parse({
  model, messages: question, tools: [zodFunction({ ...getWeather, parameters: Weather })], tool_choice: 'required',
  ...limits,
});
const parsedCall = toolParsed.choices[0].message.tool_calls[0];
out.openai_tool = {
  name: parsedCall.function.name, arguments: parsedCall.function.parsed_arguments,
  finish_reason: toolParsed.choices[0].finish_reason,
};

const stream = client.beta.chat.completions.stream({
  model, messages: question, tools: [{ type: 'function', function: { ...getWeather, parameters: weatherSchema } }],
  tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...limits,
});
const final = await stream.finalChatCompletion();
out.openai_stream = {
  calls: final.choices[0].message.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
  finish_reason: final.choices[0].finish_reason,
};

let ran = null;
const runner = client.beta.chat.completions.runTools({
  model, messages: question,
  tools: [{
    type: 'function',
    function: {
      ...getWeather, parameters: weatherSchema, parse: JSON.parse,
      function: (args) => { ran = args; return 'sunny, 12 degrees'; },
    },
  }],
  tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...limits,
});
await runner.done();
out.openai_run_tools = ran;

// ---- the Vercel AI SDK ----
const loom = createOpenAICompatible({ name: 'loom', baseURL, supportsStructuredOutputs: true });
const object = await generateObject({ model: loom(model), schema: Person, prompt: 'Who are you?', temperature: 0, maxTokens: 200 });
out.ai_object = object.object;

const weatherTool = tool({ description: getWeather.description, parameters: Weather, execute: async () => 'sunny' });
const text = await generateText({
  model: loom(model), prompt: question[0].content, tools: { get_weather: weatherTool }, toolChoice: 'required',
  temperature: 0, maxTokens: 200,
});
out.ai_generate_text = {
  calls: text.toolCalls.map((c) => ({ name: c.toolName, args: c.args })),
  results: text.toolResults.map((r) => r.result),
  finish_reason: text.finishReason,
};

const streamed = streamText({
  model: loom(model), prompt: question[0].content, tools: { get_weather: weatherTool },
  toolChoice: { type: 'tool', toolName: 'get_weather' }, temperature: 0, maxTokens: 200,
});
const streamedCalls = [];
for await (const part of streamed.fullStream) {
  if (part.type === 'error') throw part.error;
  if (part.type === 'tool-call') streamedCalls.push({ name: part.toolName, args: part.args });
}
out.ai_stream_text = { calls: streamedCalls, finish_reason: await streamed.finishReason };

// ---- LangChain.js ----
const chat = new ChatOpenAI({ model, apiKey: 'none', configuration: { baseURL }, temperature: 0, maxTokens: 200, maxRetries: 0 });
out.langchain_structured = await chat.withStructuredOutput(Person, { name: 'person' }).invoke('Who are you?');
const message = await chat
  .bindTools([{ type: 'function', function: { ...getWeather, parameters: weatherSchema } }], { tool_choice: 'get_weather' })
  .invoke(question[0].content);
out.langchain_tools = message.tool_calls.map((c) => ({ name: c.name, args: c.args, id: c.id }));

console.log(JSON.stringify(out));
