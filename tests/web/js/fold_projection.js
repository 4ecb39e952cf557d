// The canonical projection of fold.js's SessionModel (tests/web/test_fold_parity.py):
// folds each stream in a fresh model and returns its projection.
(async (streams) => {
  const { SessionModel } = await import('/static/fold.js');
  const strip = (update) => {
    if (!update) return null;
    const { sessionUpdate, ...rest } = update;
    return rest;
  };
  const base64 = (chunks) => {
    let binary = '';
    for (const chunk of chunks) for (const byte of chunk) binary += String.fromCharCode(byte);
    return btoa(binary);
  };
  const project = (model) => {
    const timeline = [];
    for (const entry of model.timeline) {
      if (entry.kind === 'message') {
        const message = model.messages.get(entry.id);
        timeline.push({
          message: entry.id, kind: message.role, content: message.blocks, fields: message.fields,
        });
      } else if (entry.kind === 'tool') {
        const { toolCallId, ...fields } = model.tools.get(entry.id);
        timeline.push({ toolCall: entry.id, fields });
      }
    }
    const terminals = {};
    for (const [id, terminal] of model.terminals) {
      const fields = {};
      for (const key of ['command', 'cwd', 'exitStatus']) {
        if (key in terminal) fields[key] = terminal[key];
      }
      terminals[id] = { fields, output: base64(terminal.chunks) };
    }
    const plans = {};
    for (const [id, plan] of model.plans) plans[id] = plan.raw;
    const extras = Object.fromEntries(model.other);
    if (model.closed) extras._hub_closed = model.closed;
    const state = model.fg
      ? { state: model.fg.state, stopReason: model.fg.stopReason ?? null }
      : null;
    return {
      timeline,
      terminals,
      plans,
      info: model.info,
      configOptions: model.configOptions,
      commands: model.commands,
      usage: strip(model.usage),
      state,
      presence: { clients: model.presence, ...model.presenceCounts },
      queue: model.queue,
      agent: strip(model.agent),
      lease: strip(model.lease),
      policy: strip(model.policy),
      prompts: Object.fromEntries(model.prompts),
      permissions: Object.fromEntries(model.permissions),
      extras,
    };
  };
  return streams.map((stream) => {
    const model = new SessionModel();
    for (const update of stream) model.apply(update);
    return JSON.parse(JSON.stringify(project(model)));
  });
})
