// openai_client.mjs - the official openai npm client against `loom serve`.
//
//   node openai_client.mjs PORT KEY
//
// makes a completion, a chat completion, the same chat streamed (its deltas
// collected), an embedding, a model listing and one request with a wrong
// key, then prints one JSON object with what came back. test_serve makes the
// same requests with its own client and compares. The bare import resolves
// from the directory this file runs in: the test runs a copy in the build
// tree's node/, where scripts/test.sh installs the package.
import OpenAI from 'openai';

const [port, apiKey] = process.argv.slice(2);
if (!port || !apiKey) {
  console.error('usage: node openai_client.mjs PORT KEY');
  process.exit(2);
}
const baseURL = `http://127.0.0.1:${port}/v1`;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const model = 'stories260K-f32.gguf';

const completion = await client.completions.create({
  model,
  prompt: 'Once upon a time',
  max_tokens: 24,
  temperature: 0,
});

const chatRequest = {
  model,
  messages: [{ role: 'user', content: 'Tell me a story about a cat.' }],
  max_tokens: 24,
  temperature: 0,
};
const chat = await client.chat.completions.create(chatRequest);

const stream = await client.chat.completions.create({ ...chatRequest, stream: true });
let content = '';
let role = null;
let chunks = 0;
let finish = null;
for await (const chunk of stream) {
  const choice = chunk.choices[0];
  if (chunks++ === 0 && choice) role = choice.delta.role ?? null;
  if (!choice) continue;
  content += choice.delta.content ?? '';
  if (choice.finish_reason) finish = choice.finish_reason;
}

const embedding = await client.embeddings.create({ model, input: 'The dog ran to the park.' });
const models = await client.models.list();

let wrongKeyStatus = null;
try {
  await new OpenAI({ baseURL, apiKey: `${apiKey}-wrong`, maxRetries: 0 }).models.list();
} catch (err) {
  wrongKeyStatus = err.status ?? String(err);
}

console.log(JSON.stringify({
  completion: {
    text: completion.choices[0].text,
    finish_reason: completion.choices[0].finish_reason,
    usage: completion.usage,
  },
  chat: {
    role: chat.choices[0].message.role,
    content: chat.choices[0].message.content,
    finish_reason: chat.choices[0].finish_reason,
    usage: chat.usage,
  },
  stream: { role, content, chunks, finish_reason: finish },
  embedding: Array.from(embedding.data[0].embedding),
  models: models.data.map((m) => m.id),
  wrong_key_status: wrongKeyStatus,
}));
