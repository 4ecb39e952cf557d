#!/usr/bin/env node
// A scripted run of the TypeScript SDK 2.4.0 WebSocket ACP client (experimental/ws-client),
// for tests that prove the hub against a third-party client whose zod schemas validate
// every frame the server sends.
//
//   node tests/peers/ws_client.mjs URL [--protocol 1|2] [--prompt TEXT] [--cwd DIR]
//        [--permission allow|reject|cancel] [--header NAME=VALUE]... [--session ID]
//
// Steps: initialize -> session/new (or, with --session ID, v1 session/load / v2 session/resume
// with replayFrom start) -> session/prompt (unless --prompt is empty) -> close. v2 waits for
// the idle state_update that ends the turn. Permission requests are answered with the first
// option of the requested kind (allow_* / reject_*), or `cancelled`.
//
// Output: one JSON object per line on stdout, {"event": ..., ...}:
//   initialized {result}, session {sessionId}, update {update}, permission {params, answer},
//   prompt {result}, stop {stopReason} (v2), done {}; errors: error {message, code?, data?}
//   and exit status 1.
import { WebSocket } from "ws";
import { createWebSocketStream } from "acp-sdk-v2/experimental/ws-client";
import * as v1 from "acp-sdk-v2";
import * as v2 from "acp-sdk-v2/experimental/v2";

// The flags of hub_client.mjs: each client is a standalone script run by node.
function parseArgs(argv) {
  const options = { protocol: 2, prompt: "hello", cwd: process.cwd(), permission: "allow", headers: {} };
  const rest = [...argv];
  options.url = rest.shift();
  while (rest.length > 0) {
    const flag = rest.shift();
    const value = rest.shift();
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--protocol") options.protocol = Number(value);
    else if (flag === "--prompt") options.prompt = value;
    else if (flag === "--cwd") options.cwd = value;
    else if (flag === "--permission") options.permission = value;
    else if (flag === "--session") options.session = value;
    else if (flag === "--header") {
      const at = value.indexOf("=");
      options.headers[value.slice(0, at)] = value.slice(at + 1);
    } else throw new Error(`unknown flag ${flag}`);
  }
  if (!options.url) throw new Error("usage: ws_client.mjs URL [options]");
  return options;
}

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");
}

function answerPermission(params, choice) {
  if (choice === "cancel") return { outcome: { outcome: "cancelled" } };
  const prefix = choice === "allow" ? "allow" : "reject";
  const option = params.options.find((o) => String(o.kind).startsWith(prefix)) ?? params.options[0];
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const stream = createWebSocketStream(options.url, { WebSocket, headers: options.headers });
  const sdk = options.protocol === 1 ? v1 : v2;
  let sessionId;
  let resolveIdle;
  const idle = new Promise((resolve) => (resolveIdle = resolve));

  const app = sdk
    .client({ name: "acp-hub-test-ws-client", version: "0" })
    .onRequest("session/request_permission", (ctx) => {
      const answer = answerPermission(ctx.params, options.permission);
      emit("permission", { params: ctx.params, answer });
      return answer;
    })
    .onNotification("session/update", (ctx) => {
      const update = ctx.params.update;
      emit("update", { sessionId: ctx.params.sessionId, update });
      if (update.sessionUpdate === "state_update" && update.state === "idle") {
        resolveIdle(update.stopReason ?? null);
      }
    });

  await app.connectWith(stream, async (ctx) => {
    const init =
      options.protocol === 1
        ? { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "ws-client", version: "0" } }
        : { protocolVersion: 2, info: { name: "ws-client", version: "0" }, capabilities: {} };
    const initialized = await ctx.request("initialize", init);
    emit("initialized", { result: initialized });
    if (options.session) {
      sessionId = options.session;
      const method = options.protocol === 1 ? "session/load" : "session/resume";
      const params = { sessionId, cwd: options.cwd, mcpServers: [] };
      if (options.protocol !== 1) params.replayFrom = { type: "start" };
      emit("resumed", { method, result: await ctx.request(method, params) });
    } else {
      const created = await ctx.request("session/new", { cwd: options.cwd, mcpServers: [] });
      sessionId = created.sessionId;
      emit("session", { sessionId, result: created });
    }
    if (options.prompt) {
      const result = await ctx.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: options.prompt }],
      });
      emit("prompt", { result });
      if (options.protocol !== 1) emit("stop", { stopReason: await idle });
    }
  });
  emit("done");
}

main().then(
  () => process.exit(0),
  (error) => {
    emit("error", { message: String(error?.message ?? error), code: error?.code, data: error?.data });
    process.exit(1);
  },
);
