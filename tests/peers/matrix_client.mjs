#!/usr/bin/env node
// The conformance scenario of tests/interop/matrix.py for the TypeScript SDK 2.4.0 client,
// unmodified: its WebSocket (experimental/ws-client) or Streamable HTTP
// (experimental/http-client) transport, speaking ACP v1 (the package's root API) or v2
// (experimental/v2).
//
//   node tests/peers/matrix_client.mjs URL ws|http 1|2 CWD
//
// Prints one JSON object: {method: "pass" | "n/a" | what went wrong}, one key per step.
import { WebSocket } from "ws";
import { createWebSocketStream } from "acp-sdk-v2/experimental/ws-client";
import { MemoryAcpCookieStore, createHttpStream } from "acp-sdk-v2/experimental/http-client";
import * as v1 from "acp-sdk-v2";
import * as v2 from "acp-sdk-v2/experimental/v2";

const [url, transport, protocolText, cwd] = process.argv.slice(2);
const version = Number(protocolText);
const sdk = version === 1 ? v1 : v2;
const TURN = "permission\nelicit force\nsay matrix done";
const SLOW = "say started\nsleep 15000\nsay not cancelled";
const out = {};

function stream() {
  return transport === "ws"
    ? createWebSocketStream(url, { WebSocket })
    : createHttpStream(url, { cookieStore: new MemoryAcpCookieStore() });
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function cell(method, step) {
  try {
    out[method] = await withTimeout(step(), 20000, method);
  } catch (error) {
    out[method] = `${error?.code ?? "error"}: ${String(error?.message ?? error).slice(0, 160)}`;
  }
}

const check = (ok, detail) => (ok ? "pass" : String(detail).slice(0, 160));

// A client app that allows permissions, accepts elicitations and records what it is shown.
function app(seen) {
  let builder = sdk
    .client({ name: "matrix-ts", version: "0" })
    .onRequest("session/request_permission", (ctx) => {
      const option = ctx.params.options.find((o) => String(o.kind).startsWith("allow"));
      return { outcome: { outcome: "selected", optionId: option.optionId } };
    })
    .onNotification("session/update", (ctx) => {
      seen.updates.push(ctx.params);
      for (const wake of seen.waiters.splice(0)) wake();
    });
  builder = builder.onRequest("elicitation/create", () => ({ action: "accept", content: { name: "m" } }));
  return builder;
}

// What the agent said, as chunks (live, v1 replay) or whole messages (v2 replay).
function texts(seen) {
  return seen.updates
    .flatMap((p) => {
      const u = p.update;
      if (u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text") return [u.content.text];
      if (u.sessionUpdate === "agent_message" && Array.isArray(u.content)) return u.content.map((b) => b.text ?? "");
      return [];
    })
    .join("");
}

function stops(seen) {
  return seen.updates
    .filter((p) => p.update.sessionUpdate === "state_update" && p.update.state === "idle" && p.update.stopReason)
    .map((p) => p.update.stopReason);
}

async function until(seen, predicate) {
  while (!predicate()) await new Promise((resolve) => seen.waiters.push(resolve));
}

function initParams() {
  return version === 1
    ? { protocolVersion: 1, clientCapabilities: { elicitation: { form: {} } }, clientInfo: { name: "matrix-ts", version: "0" } }
    : { protocolVersion: 2, info: { name: "matrix-ts", version: "0" }, capabilities: { elicitation: { form: {} } } };
}

const blocks = (text) => [{ type: "text", text }];

async function main() {
  const seen = { updates: [], waiters: [] };
  let sid = null;
  await app(seen).connectWith(stream(), async (ctx) => {
    await cell("initialize", async () => {
      const init = await ctx.request("initialize", initParams());
      return check(init.protocolVersion === version, JSON.stringify(init));
    });
    const created = await ctx.request("session/new", { cwd, mcpServers: [] });
    sid = created.sessionId;
    out["session/new"] = check(typeof sid === "string", JSON.stringify(created));

    await cell("session/list", async () => {
      const result = await ctx.request("session/list", { cwd });
      return check(result.sessions.some((s) => s.sessionId === sid), JSON.stringify(result));
    });

    await cell("session/prompt", async () => {
      const before = stops(seen).length;
      const answer = await ctx.request("session/prompt", { sessionId: sid, prompt: blocks(TURN) });
      if (version === 2) await until(seen, () => stops(seen).length > before);
      const said = texts(seen);
      out["session/request_permission"] = check(said.includes("permission: selected allow"), said);
      out["elicitation/create"] = check(said.includes("elicit: accept"), said);
      const ended = version === 1 ? answer.stopReason === "end_turn" : stops(seen).at(-1) === "end_turn";
      return check(ended && said.includes("matrix done"), JSON.stringify(answer) + said);
    });

    await cell("session/set_config_option", async () => {
      const result = await ctx.request("session/set_config_option", { sessionId: sid, configId: "mode", value: "code" });
      return check(Array.isArray(result.configOptions), JSON.stringify(result));
    });

    await cell("session/set_mode", async () => {
      if (version === 2) return "n/a";
      await ctx.request("session/set_mode", { sessionId: sid, modeId: "ask" });
      return "pass";
    });

    await cell("session/cancel", async () => {
      const before = stops(seen).length;
      const started = texts(seen).split("started").length;
      const prompt = ctx.request("session/prompt", { sessionId: sid, prompt: blocks(SLOW) });
      await until(seen, () => texts(seen).split("started").length > started);
      await ctx.notify("session/cancel", { sessionId: sid });
      const answer = await prompt;
      if (version === 1) return check(answer.stopReason === "cancelled", JSON.stringify(answer));
      await until(seen, () => stops(seen).length > before);
      return check(stops(seen).at(-1) === "cancelled", JSON.stringify(stops(seen)));
    });

    await cell("$/cancel_request", async () => {
      if (version === 2) {
        // A v2 prompt is answered once accepted: the request in flight is an extension
        // request the agent holds until it is withdrawn, and says so both times.
        const abort = new AbortController();
        const held = ctx.request("_acme/wait", { sessionId: sid }, { cancellationSignal: abort.signal });
        await until(seen, () => texts(seen).includes("held _acme/wait"));
        abort.abort();
        let code = null;
        try {
          await held;
        } catch (error) {
          code = error?.code;
        }
        await until(seen, () => texts(seen).includes("withdrawn _acme/wait"));
        return check(code === -32800, `the held request settled with ${code}`);
      }
      const started = texts(seen).split("started").length;
      const busy = ctx.request("session/prompt", { sessionId: sid, prompt: blocks(SLOW) });
      const abort = new AbortController();
      const queued = ctx.request("session/prompt", { sessionId: sid, prompt: blocks("x") }, { cancellationSignal: abort.signal });
      await until(seen, () => texts(seen).split("started").length > started);
      abort.abort();
      let code = null;
      try {
        await queued;
      } catch (error) {
        code = error?.code;
      }
      await ctx.notify("session/cancel", { sessionId: sid });
      await busy;
      return check(code === -32800, `queued prompt settled with ${code}`);
    });

    await cell("_acme/echo (extension)", async () => {
      const result = await ctx.request("_acme/echo", { sessionId: sid, n: 1 });
      return check(result?.echo?.n === 1, JSON.stringify(result));
    });

    for (const method of ["session/load", "session/resume", "session/attach"]) {
      const other = { updates: [], waiters: [] };
      await cell(method, async () =>
        app(other).connectWith(stream(), async (second) => {
          await second.request("initialize", initParams());
          let params = { sessionId: sid, cwd, mcpServers: [] };
          if (method === "session/resume") {
            if (version === 2) params.replayFrom = { type: "start" };
            else params._meta = { "acp-hub": { replay: "start" } };
          }
          if (method === "session/attach") params = { sessionId: sid, role: "observer", historyPolicy: "full" };
          const result = await second.request(method, params);
          await until(other, () => texts(other).includes("matrix done"));
          return method === "session/attach" ? check(result.role === "viewer", JSON.stringify(result)) : "pass";
        }),
      );
    }

    await cell("session/close", async () => {
      await ctx.request("session/close", { sessionId: sid });
      return "pass";
    });

    await cell("session/delete", async () => {
      const other = await ctx.request("session/new", { cwd, mcpServers: [] });
      await ctx.request("session/delete", { sessionId: other.sessionId });
      return "pass";
    });
  });
}

main()
  .catch((error) => {
    out.initialize = out.initialize ?? `error: ${String(error?.message ?? error).slice(0, 200)}`;
  })
  .finally(() => {
    process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
  });
