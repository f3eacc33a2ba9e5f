// Hostile clients against `switchyard serve` (started by hostile_clients_test.sh), over plain
// sockets and fetch: the figures a user meets.
// 1. Memory: large bodies (16 MiB: a long string, and a list of empty lists whose JSON would take
//    20 times its text) one after another; the server's RSS must come back near where it started.
// 2. Memory running out (RLIMIT_AS set on the running server with prlimit): a 23 MiB body is
//    answered 413 or 503 with a JSON error, the server lives and then answers a small request.
// 3. 64 slow clients from this address dribbling chunked bodies a byte a second: /health answers
//    within a second throughout, the slow ones get 429 (past the bound per address) or 408 (at the
//    deadline, serve --read_deadline_s).
// 4. SIGTERM: a running stream ends with an error event (no finish reason, no [DONE]) and a
//    request waiting in the queue gets 503.
// Env: SWITCHYARD_URL (http://127.0.0.1:PORT), SERVER_PID, READ_DEADLINE_S, BIG_REQUESTS (20).
// Prints the figures; exits 1 at the first failed check.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";

const base = process.env.SWITCHYARD_URL;
const pid = Number(process.env.SERVER_PID);
const deadlineS = Number(process.env.READ_DEADLINE_S ?? 3);
const bigRequests = Number(process.env.BIG_REQUESTS ?? 20);
const { port } = new URL(base);
const MiB = 1 << 20;
const status = () => readFileSync(`/proc/${pid}/status`, "utf8");
const kib = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status())[1]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function post(path, body, extra = {}) {
  const r = await fetch(base + path, { method: "POST", body, headers: { "content-type": "application/json", ...extra } });
  const text = await r.text();
  return { status: r.status, text, json: (() => { try { return JSON.parse(text); } catch { return null; } })() };
}
const health = async () => (await fetch(base + "/health")).json();
const chat = (content, extra = {}) => JSON.stringify({ messages: [{ role: "user", content }], max_tokens: 2, temperature: 0, ...extra });

// A raw HTTP exchange: resolves with everything the server sent until it closed.
function raw(send, { keepOpen = 0 } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), "127.0.0.1");
    let got = "";
    socket.on("data", (d) => (got += d));
    socket.on("error", () => {});
    socket.on("close", () => resolve(got));
    socket.on("connect", () => send(socket));
    if (keepOpen) setTimeout(() => socket.destroy(), keepOpen);
  });
}

async function check(name, body) {
  await body();
  console.log(`ok - ${name}`);
}

try {
  await check("a small request works", async () => assert.equal((await post("/v1/chat/completions", chat("hi"))).status, 200));

  await check(`${bigRequests} requests of 16 MiB leave the server's RSS where it was`, async () => {
    const before = kib("VmRSS") / 1024;
    const text = chat("a".repeat(16 * MiB - 200), { tool_choice: "auto" });  // parsed whole, then refused by name
    const lists = '{"prompt": "a", "max_tokens": [' + "[],".repeat(Math.floor((16 * MiB) / 3) - 20) + "[]]}";
    let peak = before;
    for (let i = 0; i < bigRequests; ++i) {
      const r = await post(i % 4 == 3 ? "/v1/completions" : "/v1/chat/completions", i % 4 == 3 ? lists : text);
      assert.equal(r.status, i % 4 == 3 ? 413 : 400, r.text.slice(0, 300));
      peak = Math.max(peak, kib("VmRSS") / 1024);
    }
    const after = kib("VmRSS") / 1024;
    console.log(`memory: RSS ${before.toFixed(0)} MiB before ${bigRequests} requests of 16 MiB, ${after.toFixed(0)} MiB after (peak seen ${peak.toFixed(0)})`);
    assert.ok(after - before < 128, `RSS grew ${(after - before).toFixed(0)} MiB`);
  });

  await check("a 23 MiB body when memory runs out is a 413 or 503, and the server lives", async () => {
    // The address space the server has now, plus 160 MiB: a list of 23 MiB of ones needs ~190 MiB to hold.
    const limit = (kib("VmSize") + 160 * 1024) * 1024;
    execFileSync("prlimit", [`--pid=${pid}`, `--as=${limit}:`]);
    try {
      const ones = '{"prompt": [' + "1,".repeat(Math.floor((23 * MiB) / 2)) + "1]}";
      for (const body of [ones, chat("a".repeat(23 * MiB))]) {
        const r = await post(body === ones ? "/v1/completions" : "/v1/chat/completions", body);
        console.log(`memory limit: ${r.status} ${r.text.slice(0, 160)}`);
        assert.ok([400, 413, 503].includes(r.status), `status ${r.status}`);
        assert.ok(r.json?.error?.message, r.text.slice(0, 200));
        assert.equal((await health()).status, "ok");
      }
    } finally {
      execFileSync("prlimit", [`--pid=${pid}`, "--as=unlimited:"]);
    }
    assert.equal((await post("/v1/chat/completions", chat("hi"))).status, 200);
  });

  await check("64 slow clients: /health answers within a second, the slow ones get 429 or 408", async () => {
    const began = Date.now();
    const slow = Array.from({ length: 64 }, () => raw((s) => {
      s.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
      // Until answered: bytes sent after the server has closed would be answered with a reset.
      const drip = setInterval(() => (s.writable ? s.write("1\r\n \r\n") : clearInterval(drip)), 1000);
      s.on("data", () => clearInterval(drip));
      s.on("close", () => clearInterval(drip));
    }, { keepOpen: (deadlineS + 5) * 1000 }));
    const latencies = [];
    while (Date.now() - began < (deadlineS + 1) * 1000) {
      const t = performance.now();
      assert.equal((await health()).status, "ok");
      latencies.push(performance.now() - t);
      await sleep(100);
    }
    const answers = await Promise.all(slow);
    const codes = answers.map((a) => Number(a.slice(9, 12)));
    const count = (c) => codes.filter((x) => x === c).length;
    latencies.sort((a, b) => a - b);
    console.log(`slow clients: 64 dribbling; /health ${latencies.length} times: median ${latencies[latencies.length >> 1].toFixed(1)} ms, ` +
                `max ${latencies[latencies.length - 1].toFixed(1)} ms; slow ones answered ${count(429)}× 429, ${count(408)}× 408`);
    assert.ok(latencies[latencies.length - 1] < 1000);
    assert.equal(count(429) + count(408), 64, `codes ${codes.join(",")}`);
    assert.ok(count(429) >= 32);
  });

  await check("SIGTERM: a running stream ends with an error event, a waiting request gets 503", async () => {
    const stream = await fetch(base + "/v1/chat/completions", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "go on" }], max_tokens: 3000, ignore_eos: true, stream: true }),
    });
    assert.equal(stream.status, 200);
    const reader = stream.body.getReader();
    let events = new TextDecoder().decode((await reader.read()).value);
    const waiting = post("/v1/chat/completions", chat("later"));
    while ((await health()).waiting < 1) await sleep(20);
    process.kill(pid, "SIGTERM");
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      events += new TextDecoder().decode(value);
    }
    const data = events.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
    const last = JSON.parse(data[data.length - 1]);
    assert.match(last.error?.message ?? "", /shutting down/, data[data.length - 1]);
    assert.ok(!events.includes("[DONE]") && !events.includes('"finish_reason":"stop"'));
    const w = await waiting;
    assert.equal(w.status, 503, w.text);
  });
} catch (e) {
  console.error(`not ok - ${e.stack ?? e}`);
  process.exit(1);
}
