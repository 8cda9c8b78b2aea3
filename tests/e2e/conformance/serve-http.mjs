#!/usr/bin/env node
// Serves the conformance fixture (fixture-server.mjs) over the SDK's own Streamable HTTP transport,
// to check the fixture against the suite with no warden in between: a scenario that fails here is
// the fixture's fault, one that fails only through warden is warden's.
//
//   node conformance/serve-http.mjs [PORT]     (0 or nothing: a free port)
// prints `fixture: MCP endpoint http://127.0.0.1:PORT/mcp` on stderr once listening.
import { randomUUID } from 'node:crypto';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { createFixtureServer } from './fixture-server.mjs';

// Keeps every event of a session so a client can resume a stream with Last-Event-ID (SEP-1699).
class MemoryEventStore {
  #events = new Map(); // eventId -> {streamId, message}, in insertion order
  #next = 0;
  async storeEvent(streamId, message) {
    const id = `${streamId}_${++this.#next}`;
    this.#events.set(id, { streamId, message });
    return id;
  }
  async getStreamIdForEventId(eventId) {
    return this.#events.get(eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const last = this.#events.get(lastEventId);
    if (!last) return '';
    let after = false;
    for (const [id, e] of this.#events) {
      if (after && e.streamId === last.streamId) await send(id, e.message);
      if (id === lastEventId) after = true;
    }
    return last.streamId;
  }
}

const app = createMcpExpressApp({ host: '127.0.0.1' }); // includes Host-header checks (DNS rebinding)
const sessions = new Map();

app.post('/mcp', async (req, res) => {
  const id = req.headers['mcp-session-id'];
  let transport = id && sessions.get(id);
  if (!transport) {
    if (id || !isInitializeRequest(req.body)) {
      res.status(id ? 404 : 400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'unknown or missing session' }, id: null });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new MemoryEventStore(),
      retryInterval: 500,
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await createFixtureServer().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});
const bySession = async (req, res) => {
  const transport = sessions.get(req.headers['mcp-session-id']);
  if (!transport) {
    res.status(404).send('unknown session');
    return;
  }
  await transport.handleRequest(req, res);
};
app.get('/mcp', bySession);
app.delete('/mcp', bySession);

const listener = app.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stderr.write(`fixture: MCP endpoint http://127.0.0.1:${listener.address().port}/mcp\n`);
});
