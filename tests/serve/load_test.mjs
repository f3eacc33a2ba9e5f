// A loopback load test of `switchyard serve` with the openai npm client: CLIENTS clients stream
// chats back to back for SECONDS, a fifth of them going away mid-answer (AbortController). Every
// request that was not abandoned must end with a finish reason, usage and [DONE]; the server's
// RSS (/proc/PID/status, sampled every 5 s) must not grow after the first fifth of the run.
// Env: SWITCHYARD_URL, SWITCHYARD_OPENAI (the package folder), SERVER_PID, LOAD_SECONDS, CLIENTS.
// Prints the figures; exits 1 when a request was lost or failed, or memory grew past MAX_GROWTH_MIB.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const { default: OpenAI } = await import(pathToFileURL(`${process.env.SWITCHYARD_OPENAI}/index.mjs`).href);
const client = new OpenAI({ baseURL: process.env.SWITCHYARD_URL, apiKey: "load", maxRetries: 0, timeout: 120_000 });
const seconds = Number(process.env.LOAD_SECONDS ?? 300);
const clients = Number(process.env.CLIENTS ?? 8);
const maxGrowthMiB = Number(process.env.MAX_GROWTH_MIB ?? 16);
const pid = process.env.SERVER_PID;
const end = Date.now() + seconds * 1000;
const words = ["river", "valley", "mountain", "expert", "router", "token", "cache", "東京", "🚂", "switch"];
let seed = 12345;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);

const stats = { started: 0, completed: 0, abandoned: 0, lost: 0, failed: 0, tokens: 0, latencies: [] };
const rss = [];
const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;
const sampler = setInterval(() => rss.push({ t: Date.now(), mib: rssMiB() }), 5000);
rss.push({ t: Date.now(), mib: rssMiB() });

async function one() {
  const content = Array.from({ length: 3 + Math.floor(random() * 30) }, () => words[Math.floor(random() * words.length)]).join(" ");
  const maxTokens = 4 + Math.floor(random() * 60);
  const abandonAt = random() < 0.2 ? 1 + Math.floor(random() * 10) : -1;
  const controller = new AbortController();
  const began = Date.now();
  ++stats.started;
  let chunks = 0, finish = null, usage = null;
  try {
    const stream = await client.chat.completions.create(
      { model: "tiny", messages: [{ role: "user", content }], max_tokens: maxTokens, temperature: 0.8, seed: chunks, stream: true },
      { signal: controller.signal });
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) if (c.finish_reason) finish = c.finish_reason;
      // Gone: the connection closed, the loop left (openai-node's iterator can wait forever on an
      // aborted stream whose bytes had all arrived).
      if (++chunks === abandonAt) { controller.abort(); break; }
    }
  } catch (e) {
    if (abandonAt < 0) { ++stats.failed; console.error(`failed: ${e}`); return; }
  }
  if (abandonAt >= 0 && chunks >= abandonAt && !finish) { ++stats.abandoned; return; }
  if (!finish || !usage) { ++stats.lost; console.error(`lost: ${chunks} chunks, no finish`); return; }
  ++stats.completed;
  stats.tokens += usage.completion_tokens;
  stats.latencies.push(Date.now() - began);
}

await Promise.all(Array.from({ length: clients }, async () => { while (Date.now() < end) await one(); }));
clearInterval(sampler);
rss.push({ t: Date.now(), mib: rssMiB() });
const warm = rss.filter((s) => s.t >= rss[0].t + (seconds * 1000) / 5);
const base = warm.length ? warm[0].mib : rss[0].mib;
const peak = Math.max(...rss.map((s) => s.mib));
const last = rss[rss.length - 1].mib;
const sorted = stats.latencies.sort((a, b) => a - b);
const pct = (p) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : 0;
console.log(`load: ${seconds} s, ${clients} streaming clients: ${stats.started} requests, ${stats.completed} completed, ` +
            `${stats.abandoned} abandoned by their client, ${stats.lost} lost, ${stats.failed} failed; ${stats.tokens} tokens`);
console.log(`load: latency p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms, max ${sorted[sorted.length - 1] ?? 0} ms`);
console.log(`load: server RSS ${rss[0].mib.toFixed(1)} MiB at start, ${base.toFixed(1)} after warm-up, ${last.toFixed(1)} at the end, peak ${peak.toFixed(1)}`);
// The server's own counts: every request the clients made reached it, answered or cancelled, and
// none failed or was refused (the last abandoned streams are noticed within a probe interval).
await new Promise((resolve) => setTimeout(resolve, 1500));
const health = await (await fetch(process.env.SWITCHYARD_URL.replace(/\/v1$/, "/health"))).json();
console.log(`load: the server counted ${JSON.stringify(health)}`);
const accounted = health.completed + health.cancelled === stats.started && health.failed === 0 && health.refused_full === 0;
const grew = last - base;
if (stats.lost || stats.failed || stats.completed === 0 || grew > maxGrowthMiB || !accounted) {
  console.error(`load: FAILED (${stats.lost} lost, ${stats.failed} failed, RSS grew ${grew.toFixed(1)} MiB; at most ${maxGrowthMiB}; ` +
                `server accounted for every request: ${accounted})`);
  process.exit(1);
}
