// @ts-check
/**
 * The session model: folds ACP v2 `session/update` objects and the hub's `_hub_*` variants
 * into plain state, and records which parts changed so the view can redraw only those.
 *
 * Patch semantics (ACP v2): an omitted field is unchanged, `null` clears, a value replaces;
 * arrays replace wholesale (an empty tool-call `content` or `locations` clears it); chunks
 * append, a plain text chunk joining a plain text block; snapshots (terminal output, plans,
 * config options, commands, usage, state) replace. The first sight of an id creates the
 * entity; a message's kind follows its latest update. These are the rules of the hub's own
 * fold (`hub/protocol/state.py`, docs/internals.md); tests/web/test_fold_parity.py folds the
 * same streams with both and compares them.
 *
 * The timeline holds what the hub's compaction keeps in first-appearance order: messages and
 * tool calls (and terminals no tool call shows). Plans and permission records are session
 * panels, so a page that replays the compacted session shows the same as one that watched
 * it live.
 *
 * Dirty keys: `m:<messageId>`, `t:<toolCallId>`, `term:<terminalId>` for timeline entities,
 * and the panel names `state`, `presence`, `queue`, `config`, `usage`, `info`, `agent`,
 * `lease`, `policy`, `commands`, `closed`, `plans`, `permissions`. `timeline` means entries
 * were appended; `reset` means everything must be redrawn.
 */

/**
 * @typedef {{type: string, text?: string, [key: string]: any}} ContentBlock
 * @typedef {{id: string, role: 'user' | 'agent' | 'thought', blocks: ContentBlock[],
 *   fields: Record<string, any>}} Message
 * @typedef {{toolCallId: string, title?: string, kind?: string, status?: string,
 *   content?: any[], locations?: any[], rawInput?: unknown, rawOutput?: unknown,
 *   [key: string]: any}} ToolCall
 * @typedef {{terminalId: string, command?: string, cwd?: string, chunks: Uint8Array[],
 *   size: number, exitStatus?: {exitCode?: number | null, signal?: string | null} | null}} Terminal
 * @typedef {{planId: string, type: string, entries: any[], raw: any}} Plan
 * @typedef {{permissionId: string, status: string, request?: any, resolvedBy?: any,
 *   outcome?: any, [key: string]: any}} PermissionRecord
 * @typedef {{kind: 'message' | 'tool' | 'terminal', id: string,
 *   key: string}} TimelineEntry
 */

const MESSAGE_ROLES = /** @type {const} */ ({
  user_message: 'user',
  user_message_chunk: 'user',
  agent_message: 'agent',
  agent_message_chunk: 'agent',
  agent_thought: 'thought',
  agent_thought_chunk: 'thought',
});

/**
 * Decode standard base64 into bytes (atob is fine: the alphabet is checked by it).
 * @param {string} data
 * @returns {Uint8Array}
 */
export function decodeBase64(data) {
  let binary;
  try {
    binary = atob(data);
  } catch {
    return new Uint8Array(0);
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * Apply a patch object onto a target: skip `skip` keys, delete on null, replace otherwise.
 * @param {Record<string, any>} target
 * @param {Record<string, any>} patch
 * @param {Set<string>} skip
 */
function patchInto(target, patch, skip) {
  for (const [key, value] of Object.entries(patch)) {
    if (skip.has(key)) continue;
    if (value === null) delete target[key];
    else target[key] = value;
  }
}

const TOOL_SKIP = new Set(['sessionUpdate', 'toolCallId']);
const MESSAGE_SKIP = new Set(['sessionUpdate', 'messageId', 'content']);
/** Tool-call collections for which `[]` means the same as `null` (cleared). */
const TOOL_COLLECTIONS = ['content', 'locations'];

/**
 * A text block with nothing but its text: only these are merged when chunks append.
 * @param {any} block
 * @returns {boolean}
 */
function isPlainText(block) {
  return block?.type === 'text' && typeof block.text === 'string' && Object.keys(block).length === 2;
}

export class SessionModel {
  // The state clear() sets, declared here so that its types are known.
  /** @type {TimelineEntry[]} */
  timeline;
  /** @type {Map<string, Message>} */
  messages;
  /** @type {Map<string, ToolCall>} */
  tools;
  /** @type {Map<string, Terminal>} */
  terminals;
  /** @type {Map<string, Plan>} */
  plans;
  /** @type {Map<string, PermissionRecord>} */
  permissions;
  /** @type {Map<string, {messageId?: string, clientId?: string, name?: string, role?: string}>}
   * sender of each user message (the `_hub_prompt` record) */
  prompts;
  /** @type {Set<string>} terminals shown inside a tool call */
  terminalRefs;
  /** @type {any[]} */
  configOptions;
  /** @type {any[]} */
  commands;
  /** @type {{title?: string | null, updatedAt?: string | null}} */
  info;
  /** @type {any} */
  usage;
  /** @type {{state: string, stopReason?: string | null} | null} */
  fg;
  /** @type {any[]} the listed clients (viewers only while the hub lists them) */
  presence;
  /** @type {{count: number, viewers: number}} attached clients and viewers, listed or not */
  presenceCounts;
  /** @type {any[]} */
  queue;
  /** @type {any} */
  agent;
  /** @type {any} */
  lease;
  /** @type {any} */
  policy;
  /** @type {any} */
  closed;
  /** @type {Map<string, any>} latest update of each variant this model does not know */
  other;
  /** @type {number} */
  updateCount;

  constructor() {
    /** @type {Set<string>} */
    this.dirty = new Set();
    this.clear();
  }

  /** Forget everything (a `_hub_reset`, or a fresh start). */
  clear() {
    this.timeline = [];
    this.messages = new Map();
    this.tools = new Map();
    this.terminals = new Map();
    this.plans = new Map();
    this.permissions = new Map();
    this.prompts = new Map();
    this.terminalRefs = new Set();
    this.configOptions = [];
    this.commands = [];
    this.info = {};
    this.usage = null;
    this.fg = null;
    this.presence = [];
    this.presenceCounts = { count: 0, viewers: 0 };
    this.queue = [];
    this.agent = null;
    this.lease = null;
    this.policy = null;
    this.closed = null;
    this.other = new Map();
    this.updateCount = 0;
    this.dirty.clear();
    this.dirty.add('reset');
  }

  /**
   * @param {TimelineEntry['kind']} kind
   * @param {string} id
   * @param {string} key
   */
  addEntry(kind, id, key) {
    this.timeline.push({ kind, id, key });
    this.dirty.add('timeline');
  }

  /**
   * Fold one update object (the value of `params.update`).
   * @param {any} update
   */
  apply(update) {
    if (!update || typeof update !== 'object' || typeof update.sessionUpdate !== 'string') return;
    this.updateCount += 1;
    const kind = /** @type {string} */ (update.sessionUpdate);
    switch (kind) {
      case 'user_message_chunk':
      case 'agent_message_chunk':
      case 'agent_thought_chunk':
        this.chunk(MESSAGE_ROLES[kind], update);
        break;
      case 'user_message':
      case 'agent_message':
      case 'agent_thought':
        this.upsertMessage(MESSAGE_ROLES[kind], update);
        break;
      case 'tool_call_update':
        this.upsertTool(update);
        break;
      case 'tool_call_content_chunk': {
        const tool = this.tool(String(update.toolCallId));
        if (update.content) {
          tool.content = [...(tool.content ?? []), update.content];
          this.noteTerminalRef(update.content);
        }
        this.dirty.add(`t:${tool.toolCallId}`);
        break;
      }
      case 'terminal_update':
        this.upsertTerminal(update);
        break;
      case 'terminal_output_chunk': {
        const terminal = this.terminal(String(update.terminalId));
        if (typeof update.data === 'string') {
          const bytes = decodeBase64(update.data);
          terminal.chunks.push(bytes);
          terminal.size += bytes.length;
        }
        this.dirty.add(`term:${terminal.terminalId}`);
        break;
      }
      case 'plan_update': {
        const plan = update.plan ?? {};
        const planId = String(plan.planId ?? '');
        this.plans.set(planId, {
          planId,
          type: String(plan.type ?? ''),
          entries: Array.isArray(plan.entries) ? plan.entries : [],
          raw: plan,
        });
        this.dirty.add('plans');
        break;
      }
      case 'available_commands_update':
        this.commands = Array.isArray(update.availableCommands) ? update.availableCommands : [];
        this.dirty.add('commands');
        break;
      case 'config_option_update':
        this.setConfigOptions(update.configOptions);
        break;
      case 'session_info_update':
        patchInto(this.info, update, new Set(['sessionUpdate']));
        this.dirty.add('info');
        break;
      case 'usage_update':
        this.usage = update;
        this.dirty.add('usage');
        break;
      case 'state_update':
        this.fg = { state: String(update.state), stopReason: update.stopReason ?? null };
        this.dirty.add('state');
        break;
      case '_hub_presence': {
        // The full form (replay) replaces the list; live events are deltas: drop `removed`,
        // then replace or append each record of `added`, keeping places.
        if (Array.isArray(update.clients)) {
          this.presence = update.clients;
        } else {
          const removed = new Set(Array.isArray(update.removed) ? update.removed : []);
          /** @type {Map<string, any>} */
          const byId = new Map(this.presence.filter((c) => !removed.has(c?.clientId)).map((c) => [c?.clientId, c]));
          for (const record of Array.isArray(update.added) ? update.added : []) byId.set(record?.clientId, record);
          this.presence = [...byId.values()];
        }
        const listedViewers = this.presence.filter((c) => c?.role === 'viewer').length;
        this.presenceCounts = {
          count: typeof update.count === 'number' ? update.count : this.presence.length,
          viewers: typeof update.viewers === 'number' ? update.viewers : listedViewers,
        };
        this.dirty.add('presence');
        break;
      }
      case '_hub_queue':
        this.queue = Array.isArray(update.entries) ? update.entries : [];
        this.dirty.add('queue');
        break;
      case '_hub_prompt': {
        const messageId = String(update.messageId);
        const { sessionUpdate, ...record } = update;
        this.prompts.set(messageId, record);
        this.dirty.add(`m:${messageId}`);
        break;
      }
      case '_hub_permission': {
        const permissionId = String(update.permissionId);
        let record = this.permissions.get(permissionId);
        if (!record) {
          record = { permissionId, status: 'pending' };
          this.permissions.set(permissionId, record);
        }
        // Fields merge (a null is kept as null, as the hub's fold does) and `status` replaces.
        const { sessionUpdate, ...fields } = update;
        Object.assign(record, fields);
        this.dirty.add('permissions');
        // The tool call a permission is about shows the request's fate too.
        const subjectTool = record.request?.subject?.toolCall?.toolCallId;
        if (typeof subjectTool === 'string') this.dirty.add(`t:${subjectTool}`);
        break;
      }
      // Structural: a case a snapshot variant, so that each field keeps its own type.
      case '_hub_agent':
        this.agent = update;
        this.dirty.add('agent');
        break;
      case '_hub_lease':
        this.lease = update;
        this.dirty.add('lease');
        break;
      case '_hub_policy':
        this.policy = update;
        this.dirty.add('policy');
        break;
      case '_hub_closed':
        this.closed = update;
        this.dirty.add('closed');
        break;
      case '_hub_reset':
        this.clear();
        break;
      default:
        this.other.set(kind, update);
        this.dirty.add('other');
        console.debug('acp-hub: unknown session update', kind);
    }
  }

  /**
   * @param {Message['role']} role
   * @param {string} id
   * @returns {Message}
   */
  message(role, id) {
    let message = this.messages.get(id);
    if (!message) {
      message = { id, role, blocks: [], fields: {} };
      this.messages.set(id, message);
      this.addEntry('message', id, `m:${id}`);
    }
    // A message id names one message; its kind follows the latest word about it.
    message.role = role;
    return message;
  }

  /**
   * @param {Message['role']} role
   * @param {any} update
   */
  chunk(role, update) {
    const message = this.message(role, String(update.messageId ?? ''));
    const block = update.content;
    if (block && typeof block === 'object') {
      const last = message.blocks[message.blocks.length - 1];
      // Only plain text joins plain text: a block with annotations or `_meta` stays whole.
      if (isPlainText(block) && isPlainText(last)) {
        last.text += block.text;
      } else if (isPlainText(block)) {
        // A private copy: later chunks extend it in place.
        message.blocks.push({ type: 'text', text: block.text });
      } else {
        message.blocks.push(block);
      }
    }
    this.dirty.add(`m:${message.id}`);
  }

  /**
   * @param {Message['role']} role
   * @param {any} update
   */
  upsertMessage(role, update) {
    const message = this.message(role, String(update.messageId ?? ''));
    if (update.content === null) message.blocks = [];
    else if (Array.isArray(update.content)) {
      // Copies: later chunks extend the last text block in place.
      message.blocks = update.content.map((/** @type {any} */ b) => ({ ...b }));
    }
    patchInto(message.fields, update, MESSAGE_SKIP);
    this.dirty.add(`m:${message.id}`);
  }

  /**
   * @param {string} id
   * @returns {ToolCall}
   */
  tool(id) {
    let tool = this.tools.get(id);
    if (!tool) {
      tool = { toolCallId: id };
      this.tools.set(id, tool);
      this.addEntry('tool', id, `t:${id}`);
    }
    return tool;
  }

  /** @param {any} update */
  upsertTool(update) {
    const tool = this.tool(String(update.toolCallId));
    patchInto(tool, update, TOOL_SKIP);
    // `[]` clears a collection, as `null` does.
    for (const key of TOOL_COLLECTIONS) if (Array.isArray(tool[key]) && tool[key].length === 0) delete tool[key];
    if (Array.isArray(tool.content)) for (const item of tool.content) this.noteTerminalRef(item);
    this.dirty.add(`t:${tool.toolCallId}`);
  }

  /** @param {any} item */
  noteTerminalRef(item) {
    if (item && item.type === 'terminal' && typeof item.terminalId === 'string') {
      if (!this.terminalRefs.has(item.terminalId)) {
        this.terminalRefs.add(item.terminalId);
        this.dirty.add(`term:${item.terminalId}`);
      }
    }
  }

  /**
   * @param {string} id
   * @returns {Terminal}
   */
  terminal(id) {
    let terminal = this.terminals.get(id);
    if (!terminal) {
      terminal = { terminalId: id, chunks: [], size: 0 };
      this.terminals.set(id, terminal);
      this.addEntry('terminal', id, `term:${id}`);
    }
    return terminal;
  }

  /** @param {any} update */
  upsertTerminal(update) {
    const terminal = this.terminal(String(update.terminalId));
    for (const key of ['command', 'cwd', 'exitStatus']) {
      if (!(key in update)) continue;
      if (update[key] === null) delete /** @type {any} */ (terminal)[key];
      else /** @type {any} */ (terminal)[key] = update[key];
    }
    if ('output' in update) {
      // A snapshot replaces every byte seen so far.
      const data = update.output && typeof update.output.data === 'string' ? update.output.data : '';
      const bytes = decodeBase64(data);
      terminal.chunks = [bytes];
      terminal.size = bytes.length;
    }
    this.dirty.add(`term:${terminal.terminalId}`);
  }

  /** @param {unknown} options */
  setConfigOptions(options) {
    this.configOptions = Array.isArray(options) ? options : [];
    this.dirty.add('config');
  }

  /**
   * The permission records about one tool call, oldest first.
   * @param {string} toolCallId
   * @returns {PermissionRecord[]}
   */
  permissionsFor(toolCallId) {
    return [...this.permissions.values()].filter(
      (record) => record.request?.subject?.toolCall?.toolCallId === toolCallId,
    );
  }

  /**
   * Take the set of dirty keys, leaving the model clean.
   * @returns {Set<string>}
   */
  takeDirty() {
    const dirty = new Set(this.dirty);
    this.dirty.clear();
    return dirty;
  }
}
