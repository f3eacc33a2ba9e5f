// The `openai` npm package (pinned in scripts/fetch-openai-client.sh), a client no one here wrote,
// against `switchyard serve`: SWITCHYARD_URL (http://127.0.0.1:PORT/v1) and SWITCHYARD_API_KEY.
// SWITCHYARD_OPENAI is the package's folder (.npm-clients/node_modules/openai), imported by path.
// Exits 1 with the first failed check; prints one line per check passed.
import assert from "node:assert/strict";
import { pathToFileURL } from "node:url";

const { default: OpenAI } = await import(pathToFileURL(`${process.env.SWITCHYARD_OPENAI}/index.mjs`).href);

const baseURL = process.env.SWITCHYARD_URL;
const apiKey = process.env.SWITCHYARD_API_KEY;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Name three rivers of Europe, 日本語でも." },
];

async function check(name, body) {
  await body();
  console.log(`ok - ${name}`);
}

try {
  await check("models.list names the served model", async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ["tiny"]);
  });

  let whole;
  await check("chat.completions.create answers with usage", async () => {
    whole = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 12, temperature: 0 });
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.choices.length, 1);
    assert.equal(whole.choices[0].message.role, "assistant");
    assert.equal(typeof whole.choices[0].message.content, "string");
    assert.ok(whole.choices[0].message.content.length > 0);
    assert.ok(["length", "stop"].includes(whole.choices[0].finish_reason));
    assert.ok(whole.usage.prompt_tokens > 10);
    assert.ok(whole.usage.completion_tokens >= 1 && whole.usage.completion_tokens <= 12);
    assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
  });

  await check("a streamed chat is the same answer, piece by piece", async () => {
    const stream = await client.chat.completions.create({
      model: "tiny", messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    let text = "", pieces = 0, finish = null, usage = null, role = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        if (choice.delta.role) role = choice.delta.role;
        if (choice.delta.content) { text += choice.delta.content; ++pieces; }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    assert.equal(role, "assistant");
    assert.equal(text, whole.choices[0].message.content);
    assert.ok(pieces >= 2, `${pieces} pieces`);
    assert.equal(finish, whole.choices[0].finish_reason);
    const counts = ({ prompt_tokens, completion_tokens, total_tokens }) => ({ prompt_tokens, completion_tokens, total_tokens });
    assert.deepEqual(counts(usage), counts(whole.usage));
    // The same prompt as the request before: all of it came from the KV cache, its last token's
    // choice too, and the answer is the same.
    assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens);
  });

  await check("a stop string ends the answer just before it", async () => {
    const text = whole.choices[0].message.content;
    const cut = Math.floor(text.length / 2);
    const stop = text.slice(cut, cut + 2);
    const first = text.indexOf(stop);
    const stopped = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 12, temperature: 0, stop: [stop] });
    assert.equal(stopped.choices[0].message.content, text.slice(0, first));
    assert.equal(stopped.choices[0].finish_reason, "stop");
  });

  await check("completions.create continues a prompt, streamed and not", async () => {
    const done = await client.completions.create({ model: "tiny", prompt: "The river Danube", max_tokens: 6, temperature: 0 });
    assert.equal(done.object, "text_completion");
    assert.equal(done.usage.completion_tokens, 6);
    const stream = await client.completions.create({ model: "tiny", prompt: "The river Danube", max_tokens: 6, temperature: 0, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
    assert.equal(text, done.choices[0].text);
  });

  await check("sampling with a seed repeats", async () => {
    const ask = () => client.chat.completions.create({ model: "tiny", messages, max_tokens: 8, temperature: 0.9, top_p: 0.95, seed: 11 });
    assert.equal((await ask()).choices[0].message.content, (await ask()).choices[0].message.content);
  });

  await check("a wrong API key is a 401 AuthenticationError", async () => {
    const stranger = new OpenAI({ baseURL, apiKey: "not-the-key", maxRetries: 0 });
    await assert.rejects(stranger.chat.completions.create({ model: "tiny", messages, max_tokens: 2 }),
                         (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  });

  await check("a bad field is a 400 BadRequestError naming it", async () => {
    await assert.rejects(client.chat.completions.create({ model: "tiny", messages, max_tokens: 2, temperature: 7 }),
                         (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature");
    await assert.rejects(client.chat.completions.create({ model: "tiny", messages: "hello" }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === "messages");
  });

  await check("a prompt past the context is a 400 context_length_exceeded", async () => {
    const long = [{ role: "user", content: "river ".repeat(5000) }];
    await assert.rejects(client.chat.completions.create({ model: "tiny", messages: long, max_tokens: 2 }),
                         (e) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded");
  });

  await check("a client that aborts mid-stream leaves the server serving", async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "tiny", messages, max_tokens: 2000, temperature: 0, stream: true, ignore_eos: true }, { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const _ of stream) if (++chunks === 3) { controller.abort(); break; }
    } catch (e) {
      if (!(e instanceof OpenAI.APIUserAbortError) && e.name !== "AbortError") throw e;
    }
    assert.equal(chunks, 3);  // the stream ends at the abort (the server logs the cancel: the script checks)
    const after = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 12, temperature: 0 });
    assert.equal(after.choices[0].message.content, whole.choices[0].message.content);
  });
} catch (e) {
  console.error(`not ok - ${e.stack ?? e}`);
  process.exit(1);
}
