// e2e.mjs BASE_URL MODEL — the official `openai` client against `deepinfer serve`
// (run by tests/serve/test_serve_e2e.c). Checks a chat completion, a streamed chat
// with reasoning (thinking on) and usage, response_format json_schema validated
// with ajv, a tool call parsed into tool_calls, seeds giving identical outputs,
// and a bad request getting a 400 OpenAI-shaped error. Prints one line per check;
// exits 0 only when every check passed.
import { createRequire } from 'node:module';
import OpenAI from 'openai';

const require = createRequire(import.meta.url);
const Ajv2020 = require('../ajv/node_modules/ajv/dist/2020.js');

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const user = (content) => [{ role: 'user', content }];
let failed = 0;

function check(cond, what, detail) {
  if (cond) console.log(`ok   ${what}`);
  else {
    failed++;
    console.log(`FAIL ${what}: ${detail === undefined ? '' : JSON.stringify(detail)}`);
  }
}

async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: threw ${e && e.stack ? e.stack : e}`);
  }
}

await step('models', async () => {
  const list = await client.models.list();
  check(list.data.length === 1 && list.data[0].id === model, 'GET /v1/models lists the served model', list.data);
});

await step('chat', async () => {
  const r = await client.chat.completions.create({ model, messages: user('Hello there'), max_tokens: 8, seed: 3 });
  const c = r.choices[0];
  check(r.object === 'chat.completion' && r.id && r.model === model, 'chat completion object', r);
  check(c.message.role === 'assistant' && typeof c.message.content === 'string' && c.message.content.length > 0,
        'chat completion has assistant content', c);
  check(['stop', 'length'].includes(c.finish_reason), 'chat finish_reason', c.finish_reason);
  check(r.usage.completion_tokens > 0 && r.usage.prompt_tokens > 0 &&
        r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'chat usage', r.usage);
});

await step('stream', async () => {
  const params = { model, messages: user('Think about the sea'), max_tokens: 12, seed: 9, thinking: true };
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let reasoning = '', reasoningAlias = '', content = '', usage = null, finish = null, chunks = 0, role = null;
  for await (const ch of stream) {
    chunks++;
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      if (c.delta.role) role = c.delta.role;
      reasoning += c.delta.reasoning_content || '';
      reasoningAlias += c.delta.reasoning || '';
      content += c.delta.content || '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(chunks > 2 && role === 'assistant', 'stream: several chunks, the first with the role', { chunks, role });
  check(reasoning.length > 0 && reasoning === reasoningAlias, 'stream: reasoning in delta.reasoning_content and delta.reasoning',
        { reasoning, reasoningAlias });
  check(usage && usage.completion_tokens === 12 && usage.prompt_tokens > 0, 'stream: include_usage chunk', usage);
  check(finish === 'length', 'stream: finish_reason', finish);
  // the same request without streaming: the same reasoning and content
  const r = await client.chat.completions.create(params);
  check(r.choices[0].message.reasoning_content === reasoning && (r.choices[0].message.content || '') === content,
        'stream and non-stream give the same reasoning and content', { stream: [reasoning, content], full: r.choices[0].message });
});

await step('json_schema', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  const r = await client.chat.completions.create({
    model, messages: user('Describe a person as JSON'), max_tokens: 160, seed: 5, temperature: 0.7,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
  });
  const text = r.choices[0].message.content;
  let value = null;
  try { value = JSON.parse(text); } catch (e) { /* reported below */ }
  const validate = new Ajv2020({ strict: false }).compile(schema);
  check(r.choices[0].finish_reason === 'stop', 'json_schema: the grammar ended the output', r.choices[0]);
  check(value !== null && validate(value), 'json_schema: content validates with ajv', { text, errors: validate.errors });
});

await step('tool_call', async () => {
  // The tiny demo model does not write DSML by itself, so the output is forced with
  // vLLM's structured_outputs regex to the V4.1 tool-call block; the server's parser
  // turns the model's text into tool_calls.
  const D = '\uff5cDSML\uff5c';
  const block = `<${D} calls>\n<${D} invoke name="get_weather">\n<${D} parameter name="city" string="true">Paris</${D} parameter>\n` +
    `<${D} parameter name="days" string="false">3</${D} parameter>\n</${D} invoke>\n</${D} calls>`;
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'weather',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } }];
  const r = await client.chat.completions.create({
    model, messages: user('Weather in Paris?'), tools, max_tokens: 400, temperature: 0,
    structured_outputs: { regex: block.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') },
  });
  const c = r.choices[0];
  const tc = (c.message.tool_calls || [])[0];
  check(c.finish_reason === 'tool_calls', 'tool call: finish_reason tool_calls', c);
  check(tc && tc.type === 'function' && tc.id && tc.function.name === 'get_weather', 'tool call: the function', tc);
  let args = null;
  try { args = JSON.parse(tc.function.arguments); } catch (e) { /* reported below */ }
  check(args && args.city === 'Paris' && args.days === 3, 'tool call: arguments JSON', tc && tc.function.arguments);
  // streamed: the block is never shown as content, the call arrives in delta.tool_calls
  const stream = await client.chat.completions.create({
    model, messages: user('Weather in Paris?'), tools, max_tokens: 400, temperature: 0, stream: true,
    structured_outputs: { regex: block.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') },
  });
  let content = '', calls = [], finish = null;
  for await (const ch of stream)
    for (const x of ch.choices) {
      content += x.delta.content || '';
      if (x.delta.tool_calls) calls.push(...x.delta.tool_calls);
      if (x.finish_reason) finish = x.finish_reason;
    }
  check(content === '' && calls.length === 1 && calls[0].function.name === 'get_weather' && finish === 'tool_calls',
        'tool call: streamed as delta.tool_calls', { content, calls, finish });
});

await step('seed', async () => {
  const p = { model, messages: user('Tell me a story'), max_tokens: 10, temperature: 1.0 };
  const a = await client.chat.completions.create({ ...p, seed: 1234 });
  const b = await client.chat.completions.create({ ...p, seed: 1234 });
  const c = await client.chat.completions.create({ ...p, seed: 4321 });
  check(a.choices[0].message.content === b.choices[0].message.content, 'seed: the same seed gives the same output',
        [a.choices[0].message.content, b.choices[0].message.content]);
  check(a.choices[0].message.content !== c.choices[0].message.content, 'seed: another seed gives another output',
        [a.choices[0].message.content, c.choices[0].message.content]);
});

await step('bad_request', async () => {
  let err = null;
  try {
    await client.chat.completions.create({ model, messages: user('x'), temperature: -1 });
  } catch (e) {
    err = e;
  }
  check(err instanceof OpenAI.BadRequestError && err.status === 400, 'bad request: 400 BadRequestError', err && err.status);
  check(err && err.error && err.error.type === 'invalid_request_error' && err.param === 'temperature' &&
        typeof err.error.message === 'string' && 'code' in err.error, 'bad request: OpenAI-shaped error naming the field',
        err && err.error);
  let nf = null;
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages: user('x') });
  } catch (e) {
    nf = e;
  }
  check(nf instanceof OpenAI.NotFoundError && nf.code === 'model_not_found', 'unknown model: 404', nf && nf.error);
});

await step('completions', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5, logprobs: 2, seed: 2 });
  const c = r.choices[0];
  check(r.object === 'text_completion' && typeof c.text === 'string' && c.logprobs.tokens.length === 5 &&
        c.logprobs.top_logprobs[0] && Object.keys(c.logprobs.top_logprobs[0]).length === 2, 'completions with logprobs', c);
});

console.log(failed ? `${failed} check(s) failed` : 'all checks passed');
process.exit(failed ? 1 : 0);
