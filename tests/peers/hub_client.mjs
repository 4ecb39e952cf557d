#!/usr/bin/env node
// One run of the TypeScript SDK 2.4.0 WebSocket ACP client against a server, reported as a
// single JSON summary: did the SDK's zod schemas accept every frame the server sent?
//
//   node tests/peers/hub_client.mjs URL [--protocol 1|2] [--session ID] [--prompt TEXT]
//        [--cwd DIR] [--agent NAME] [--permission allow|reject|cancel] [--timeout MS]
//
// Steps: initialize (protocolVersion 1 or 2) -> session/new (with `_meta["acp-hub"].agent`
// when --agent is given) or, with --session ID, v2 `session/resume` with
// `replayFrom: {type: "start"}` / v1 `session/load` -> session/prompt (skipped with
// --prompt "") -> in v2, wait for the `state_update` running, then the idle that ends the turn.
//
// The SDK surfaces schema violations in three ways, and each one fails the run:
// - a response in a wrong shape rejects the pending call (-> `error`);
// - a notification in a wrong shape is dropped and logged with console.error
//   ("Error handling notification") -> `sdkErrors`;
// - a request in a wrong shape, a JSON batch (dropped by the transport) or any other frame it
//   refuses is answered with a JSON-RPC error -> `errorsSent`.
// The raw socket is recorded too, so `frames.updates` (session/update notifications on the wire,
// batches included) can be compared with `updates` (the ones the SDK validated and delivered).
//
// The SDK's schemas also salvage some malformed values silently (a bad list item is skipped, a
// bad optional field replaced by its default): every delivered update is compared with its raw
// params, and each one that lost something is listed in `altered` with the lost paths.
//
// Output: one JSON object on stdout: {ok, protocol, initialize, sessionId, opened, prompt,
// stopReason, updates: [params], permissions: [{params, answer}], frames: {received, batches,
// updates}, altered: [{index, paths, raw}], sdkErrors: [text], errorsSent: [message],
// error: null | {message, code, data}}. `ok` (exit status 0, else 1) means: no error, nothing
// refused, nothing altered, and every session/update on the wire was delivered.
import { WebSocket } from "ws";
import { createWebSocketStream } from "acp-sdk-v2/experimental/ws-client";
import * as v1 from "acp-sdk-v2";
import * as v2 from "acp-sdk-v2/experimental/v2";

const summary = {
  ok: false,
  protocol: 2,
  initialize: null,
  sessionId: null,
  opened: null,
  prompt: null,
  stopReason: null,
  updates: [],
  permissions: [],
  frames: { received: 0, batches: 0, updates: 0 },
  altered: [],
  sdkErrors: [],
  errorsSent: [],
  error: null,
};

const originalConsoleError = console.error.bind(console);
console.error = (...args) => {
  summary.sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  originalConsoleError(...args);
};

function parseArgs(argv) {
  const options = { protocol: 2, prompt: "hello", cwd: process.cwd(), permission: "allow", timeout: 15000 };
  const rest = [...argv];
  options.url = rest.shift();
  while (rest.length > 0) {
    const flag = rest.shift();
    const value = rest.shift();
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--protocol") options.protocol = Number(value);
    else if (flag === "--prompt") options.prompt = value;
    else if (flag === "--cwd") options.cwd = value;
    else if (flag === "--agent") options.agent = value;
    else if (flag === "--permission") options.permission = value;
    else if (flag === "--session") options.session = value;
    else if (flag === "--timeout") options.timeout = Number(value);
    else throw new Error(`unknown flag ${flag}`);
  }
  if (!options.url) throw new Error("usage: hub_client.mjs URL [options]");
  if (options.protocol !== 1 && options.protocol !== 2) throw new Error("--protocol is 1 or 2");
  return options;
}

const rawUpdates = [];
let recording = true; // off once the run has what it came for: later frames are not judged

function countIncoming(text) {
  if (!recording) return;
  summary.frames.received += 1;
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return;
  }
  if (Array.isArray(value)) summary.frames.batches += 1;
  for (const entry of Array.isArray(value) ? value : [value]) {
    if (entry && entry.method === "session/update") {
      summary.frames.updates += 1;
      rawUpdates.push(entry.params);
    }
  }
}

// Paths where `raw` (what came over the wire) carries something `parsed` (what the SDK's
// schemas let through) does not: a dropped list item, a salvaged field, a stripped key.
function lostPaths(raw, parsed, path = "$") {
  if (raw === null || typeof raw !== "object") {
    return raw === parsed ? [] : [path];
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(raw) !== Array.isArray(parsed)) {
    return [path];
  }
  if (Array.isArray(raw)) {
    if (raw.length !== parsed.length) return [`${path}.length`];
    return raw.flatMap((item, i) => lostPaths(item, parsed[i], `${path}[${i}]`));
  }
  return Object.keys(raw).flatMap((key) =>
    raw[key] === undefined ? [] : key in parsed ? lostPaths(raw[key], parsed[key], `${path}.${key}`) : [`${path}.${key}`],
  );
}

function compareUpdates() {
  if (rawUpdates.length !== summary.updates.length) return;
  rawUpdates.forEach((raw, index) => {
    const paths = lostPaths(raw, summary.updates[index]);
    if (paths.length > 0) summary.altered.push({ index, paths, raw });
  });
}

function recordOutgoing(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return;
  }
  if (value && typeof value === "object" && "error" in value) summary.errorsSent.push(value);
}

// The SDK's transport takes the WebSocket constructor as an option; this one records the raw
// frames on both directions without changing what the SDK sees.
class RecordingWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    this.on("message", (data, isBinary) => {
      if (!isBinary) countIncoming(data.toString("utf8"));
    });
  }

  send(data, ...rest) {
    recordOutgoing(typeof data === "string" ? data : Buffer.from(data).toString("utf8"));
    return super.send(data, ...rest);
  }
}

function answerPermission(params, choice) {
  if (choice === "cancel") return { outcome: { outcome: "cancelled" } };
  const prefix = choice === "allow" ? "allow" : "reject";
  const option = params.options.find((o) => String(o.kind).startsWith(prefix)) ?? params.options[0];
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function run(options) {
  summary.protocol = options.protocol;
  const stream = createWebSocketStream(options.url, { WebSocket: RecordingWebSocket });
  const sdk = options.protocol === 1 ? v1 : v2;
  let resolveIdle;
  const idle = new Promise((resolve) => (resolveIdle = resolve));
  // The turn is the one our prompt started: a replayed or earlier idle does not end it.
  let promptSent = false;
  let turnRunning = false;

  const app = sdk
    .client({ name: "acp-hub-sdk-client", version: "0" })
    .onRequest("session/request_permission", (ctx) => {
      const answer = answerPermission(ctx.params, options.permission);
      summary.permissions.push({ params: ctx.params, answer });
      return answer;
    })
    .onNotification("session/update", (ctx) => {
      summary.updates.push(ctx.params);
      const update = ctx.params.update;
      const replayed = ctx.params._meta?.["acp-hub"]?.replay === true;
      if (!promptSent || replayed || update.sessionUpdate !== "state_update") return;
      if (update.state === "running") turnRunning = true;
      else if (update.state === "idle" && update.stopReason && turnRunning) resolveIdle(update.stopReason);
    });

  await app.connectWith(stream, async (ctx) => {
    const init =
      options.protocol === 1
        ? { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "sdk-client", version: "0" } }
        : { protocolVersion: 2, info: { name: "sdk-client", version: "0" }, capabilities: {} };
    summary.initialize = await ctx.request("initialize", init);
    if (options.session) {
      summary.sessionId = options.session;
      const params = { sessionId: options.session, cwd: options.cwd, mcpServers: [] };
      if (options.protocol === 1) {
        summary.opened = await ctx.request("session/load", params);
      } else {
        params.replayFrom = { type: "start" };
        summary.opened = await ctx.request("session/resume", params);
      }
    } else {
      const params = { cwd: options.cwd, mcpServers: [] };
      if (options.agent) params._meta = { "acp-hub": { agent: options.agent } };
      summary.opened = await ctx.request("session/new", params);
      summary.sessionId = summary.opened.sessionId;
    }
    if (options.prompt) {
      promptSent = true;
      const prompt = ctx.request("session/prompt", {
        sessionId: summary.sessionId,
        prompt: [{ type: "text", text: options.prompt }],
      });
      summary.prompt = await withTimeout(prompt, options.timeout, "the session/prompt answer");
      if (options.protocol === 1) summary.stopReason = summary.prompt.stopReason ?? null;
      else summary.stopReason = await withTimeout(idle, options.timeout, "the idle state_update");
    }
    recording = false;
    // Frames already on the wire are handled a few ticks later; give them time to arrive
    // (a frame the SDK refused never does: then this waits the whole half second).
    for (let i = 0; i < 100 && summary.updates.length < rawUpdates.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  });
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
    await run(options);
  } catch (error) {
    summary.error = { message: String(error?.message ?? error), code: error?.code, data: error?.data };
  }
  compareUpdates();
  summary.ok =
    summary.error === null &&
    summary.sdkErrors.length === 0 &&
    summary.errorsSent.length === 0 &&
    summary.altered.length === 0 &&
    summary.updates.length === rawUpdates.length;
  process.stdout.write(JSON.stringify(summary) + "\n", () => process.exit(summary.ok ? 0 : 1));
}

main();
