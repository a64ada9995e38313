// The official openai Node SDK against a running cairn-server's HTTP API.
// openai_sdk_test.py starts the server, runs this with CAIRN_HTTP (the base
// URL), CAIRN_TOKEN and CAIRN_CONVERSATION (a JSON array of messages), and
// checks the JSON it prints against the server's gRPC API.
import OpenAI from "openai";

const baseURL = process.env.CAIRN_HTTP;
const client = new OpenAI({ baseURL, apiKey: process.env.CAIRN_TOKEN, maxRetries: 0 });
const messages = JSON.parse(process.env.CAIRN_CONVERSATION);
const ids = JSON.parse(process.env.CAIRN_PROMPT_IDS);
const out = {};

out.models = (await client.models.list()).data.map((m) => m.id);

// A streamed chat, greedy, with the usage chunk.
let streamed = "";
let usage = null;
let finish = null;
const stream = await client.chat.completions.create({
  model: "demo-chat", messages, temperature: 0, max_tokens: 12, stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) continue;
  if (choice.delta?.content) streamed += choice.delta.content;
  if (choice.finish_reason) finish = choice.finish_reason;
}
out.stream = { content: streamed, usage, finish };

// The same conversation whole.
const whole = await client.chat.completions.create({ model: "demo-chat", messages, temperature: 0, max_tokens: 12 });
out.whole = { content: whole.choices[0].message.content, usage: whole.usage, finish: whole.choices[0].finish_reason };

// A tool round trip: tools offered, the assistant's call and the tool's
// result sent back, the model answers.
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const first = await client.chat.completions.create({
  model: "qwen", messages: [{ role: "user", content: "weather in Paris?" }], tools, tool_choice: "auto",
  temperature: 0, max_tokens: 8,
});
const calls = first.choices[0].message.tool_calls ?? [
  { id: "call_1", type: "function", function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) } },
];
const second = await client.chat.completions.create({
  model: "qwen", tools, temperature: 0, max_tokens: 8,
  messages: [
    { role: "user", content: "weather in Paris?" },
    { role: "assistant", content: null, tool_calls: calls },
    { role: "tool", tool_call_id: calls[0].id, content: JSON.stringify({ temperature_c: 18 }) },
  ],
});
out.tools = { first_finish: first.choices[0].finish_reason, model_called: !!first.choices[0].message.tool_calls,
  second_finish: second.choices[0].finish_reason, second_prompt_tokens: second.usage.prompt_tokens };

// A completion from token ids.
const completion = await client.completions.create({ model: "demo-transformer", prompt: ids, max_tokens: 5, temperature: 0 });
out.completion = { text: completion.choices[0].text, usage: completion.usage };

// A wrong key.
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  out.auth = "accepted";
} catch (e) {
  out.auth = e instanceof OpenAI.AuthenticationError ? e.status : String(e);
}

// A stream the client aborts after three chunks.
const controller = new AbortController();
let received = 0;
try {
  const long = await client.chat.completions.create(
    { model: "demo-chat", messages: [{ role: "user", content: "a very long story" }], max_tokens: 100000,
      ignore_eos: true, stream: true },  // ignore_eos: vLLM's extension, which cairn takes
    { signal: controller.signal });
  for await (const chunk of long) {
    if (++received === 3) controller.abort();
  }
  out.abort = "ended";
} catch (e) {
  out.abort = e instanceof OpenAI.APIUserAbortError ? "aborted" : String(e);
}
out.abort_received = received;

console.log(JSON.stringify(out));
