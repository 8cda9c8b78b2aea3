#!/usr/bin/env node
// An MCP server on the TypeScript SDK v2 (@modelcontextprotocol/server) that serves BOTH protocol
// eras with one definition of its tools, resources and prompts:
//
//   - 2025-11-25 (legacy): the initialize handshake, Mcp-Session-Id sessions, server->client
//     requests (sampling, elicitation) on the POST's SSE stream, logging/setLevel, subscribe;
//   - 2026-07-28 (modern): stateless requests carrying the per-request `_meta` envelope
//     (io.modelcontextprotocol/protocolVersion, clientInfo, clientCapabilities), server/discover,
//     input_required results (multi-round-trip: inputRequests, inputResponses, requestState),
//     ttlMs/cacheScope caching hints, subscriptions/listen.
//
// It implements what every scored SERVER scenario of @modelcontextprotocol/conformance asks of the
// server under test, for `--requirements 2025-11-25` and `--requirements 2026-07-28` alike (the
// names, contents and behaviours in each scenario's "Server Implementation Requirements"), plus
// the not-scored ones it can (json-schema-2020-12, server-sse-polling, server-session-lifecycle).
//
//   node dual-era-server.mjs --stdio               stdio; the opening message picks the era
//   node dual-era-server.mjs --http PORT           Streamable HTTP on 127.0.0.1:PORT/mcp (0: free
//                                                  port); prints `dual-era: MCP endpoint URL` on
//                                                  stderr once listening
//   add --era 2025 to either                       a 2025-only server: answers 2026 requests the
//                                                  way an SDK 1.x server does (no session -> HTTP
//                                                  400; server/discover -> -32601 over stdio)
//   DUAL_ERA_DEBUG=1                               report each 2026 request the SDK rejects
//                                                  (ladder rejections) on stderr
//
// Serving both eras uses the SDK's own entry points: over HTTP, createMcpHandler (legacy:
// 'reject') for 2026-07-28 requests, with isLegacyRequest routing 2025 traffic to a sessionful
// WebStandardStreamableHTTPServerTransport (the pattern the SDK documents for "keep a sessionful
// legacy deployment next to a strict modern endpoint"; the handler's own 'stateless' legacy
// fallback cannot carry sampling/elicitation round trips or SSE resumption); over stdio,
// serveStdio, which pins each connection to the era of its opening exchange. Every multi-round
// tool is written once with inputRequired(): on 2026 requests the client fulfils it, on 2025
// sessions the SDK's legacy shim turns it into real server->client requests.
//
// Written on the low-level Server so every answer is exactly what the
// scenarios check: json-schema-2020-12 compares the tool's input schema verbatim.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import {
  Server,
  WebStandardStreamableHTTPServerTransport,
  createMcpHandler,
  createRequestStateCodec,
  hostHeaderValidationResponse,
  inputRequired,
  inputResponse,
  isInitializeRequest,
  isLegacyRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
} from '@modelcontextprotocol/server';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';

// ---------------------------------------------------------------------------------------------
// Command line

function usage(message) {
  process.stderr.write(`dual-era: ${message}\nusage: dual-era-server.mjs (--stdio | --http PORT) [--era 2025]\n`);
  process.exit(2);
}
const argv = process.argv.slice(2);
let mode;
let port;
let eraOnly; // undefined: both eras; '2025': 2025-only
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--stdio') mode = 'stdio';
  else if (a === '--http') {
    mode = 'http';
    port = Number(argv[++i]);
    if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`bad port: ${argv[i]}`);
  } else if (a === '--era') {
    eraOnly = argv[++i];
    if (eraOnly !== '2025') usage(`unknown era: ${eraOnly} (only "2025" restricts the server)`);
  } else usage(`unknown argument: ${a}`);
}
if (!mode) usage('pick --stdio or --http PORT');

// The 2025-era revisions an SDK 1.x server negotiates (no 2026-07-28): used with --era 2025.
const LEGACY_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

// ---------------------------------------------------------------------------------------------
// Content

// A valid 1x1 red PNG and a valid 8-sample silent 8 kHz mono WAV, both made here byte by byte.
const RED_PIXEL_PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const SILENT_WAV = (() => {
  const samples = 8;
  const b = Buffer.alloc(44 + samples);
  b.write('RIFF', 0); b.writeUInt32LE(36 + samples, 4); b.write('WAVE', 8);
  b.write('fmt ', 12); b.writeUInt32LE(16, 16); b.writeUInt16LE(1, 20); b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24); b.writeUInt32LE(8000, 28); b.writeUInt16LE(1, 32); b.writeUInt16LE(8, 34);
  b.write('data', 36); b.writeUInt32LE(samples, 40); b.fill(128, 44);
  return b.toString('base64');
})();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const NO_ARGS = { type: 'object', properties: {} };
// What the client can answer: a 2026 request declares it in its own envelope (the SDK's stdio
// server does not surface that through getClientCapabilities), a 2025 session at initialize.
const clientCaps = (server, ctx) =>
  ctx?.mcpReq?.envelope?.['io.modelcontextprotocol/clientCapabilities'] ?? server.getClientCapabilities() ?? {};

// requestState is minted and verified with an HMAC (the SDK's codec): one key per process, which
// is enough because one process serves every round of a flow. Tampered or foreign state is
// refused by the SDK before the handler runs (-32602 "Invalid or expired requestState").
const stateCodec = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: 600 });

// Embedded input requests (the `inputRequests` values of an input_required result).
const elicit = (message, properties, required = Object.keys(properties)) => ({
  method: 'elicitation/create',
  params: { message, requestedSchema: { type: 'object', properties, required } },
});
const sample = (prompt, maxTokens = 100) => ({
  method: 'sampling/createMessage',
  params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens },
});
const listRoots = () => ({ method: 'roots/list', params: {} });

/** The accepted content of an elicitation response, or undefined (missing, declined, malformed). */
function accepted(ctx, key) {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  return view.kind === 'elicit' && view.action === 'accept' ? (view.content ?? {}) : undefined;
}
function sampled(ctx, key) {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  if (view.kind !== 'sampling') return undefined;
  const c = view.result.content;
  const block = Array.isArray(c) ? c.find((b) => b.type === 'text') : c;
  return block?.type === 'text' ? block.text : JSON.stringify(c);
}
function roots(ctx, key) {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  return view.kind === 'roots' ? view.roots : undefined;
}
/** Any elicitation answer (accept, decline or cancel), for tools that report what the user did. */
function elicitAnswer(ctx, key) {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  return view.kind === 'elicit' ? view : undefined;
}

/** Elicits a form (2025 scenarios elicitation-sep1034-defaults / -sep1330-enums). */
function elicitForm(ctx, message, properties) {
  const answer = elicitAnswer(ctx, 'form');
  if (!answer) return inputRequired({ inputRequests: { form: elicit(message, properties, []) } });
  return text(`Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
}

// Each tool: the description and input schema tools/list shows, and what tools/call does. `run`
// gets (args, ctx, server, env); env.notify publishes list changes to 2026 subscriptions/listen
// streams (HTTP) or sends them as 2025 notifications.
const TOOLS = {
  // --- content (both eras) ---
  test_simple_text: {
    description: 'Returns simple text content',
    inputSchema: NO_ARGS,
    run: async () => text('This is a simple text response for testing.'),
  },
  test_image_content: {
    description: 'Returns image content (a 1x1 red PNG)',
    inputSchema: NO_ARGS,
    run: async () => ({ content: [{ type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' }] }),
  },
  test_audio_content: {
    description: 'Returns audio content (a short silent WAV)',
    inputSchema: NO_ARGS,
    run: async () => ({ content: [{ type: 'audio', data: SILENT_WAV, mimeType: 'audio/wav' }] }),
  },
  test_embedded_resource: {
    description: 'Returns an embedded text resource',
    inputSchema: NO_ARGS,
    run: async () => ({
      content: [{
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      }],
    }),
  },
  test_multiple_content_types: {
    description: 'Returns text, image and resource content together',
    inputSchema: NO_ARGS,
    run: async () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) },
        },
      ],
    }),
  },
  test_error_handling: {
    description: 'Always fails with a tool error',
    inputSchema: NO_ARGS,
    run: async () => ({ isError: true, ...text('This tool intentionally returns an error for testing') }),
  },
  test_tool_with_progress: {
    description: 'Reports progress 0, 50 and 100 of 100 when given a progress token',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
        }
        if (progress < 100) await sleep(50);
      }
      return text('Tool with progress executed successfully');
    },
  },
  json_schema_2020_12_tool: {
    // The schema json-schema-2020-12 expects verbatim in tools/list (SEP-1613, SEP-2106).
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: {
        address: {
          $anchor: 'addressDef',
          type: 'object',
          properties: { street: { type: 'string' }, city: { type: 'string' } },
        },
      },
      properties: {
        name: { type: 'string' },
        address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] },
        phone: { type: 'string' },
        email: { type: 'string' },
      },
      allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
      if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
      then: { required: ['phone'] },
      else: { required: ['email'] },
      additionalProperties: false,
    },
    run: async (args) => text(`Received: ${JSON.stringify(args)}`),
  },

  // --- 2025 scenarios (logging, server->client requests, SSE polling) ---
  test_tool_with_logging: {
    description: 'Sends three info log messages while it runs',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      await ctx.mcpReq.log('info', 'Tool execution started', 'dual-era');
      await sleep(50);
      await ctx.mcpReq.log('info', 'Tool processing data', 'dual-era');
      await sleep(50);
      await ctx.mcpReq.log('info', 'Tool execution completed', 'dual-era');
      return text('Tool with logging executed successfully');
    },
  },
  test_sampling: {
    description: 'Asks the client to sample an LLM with the given prompt',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } }, required: ['prompt'] },
    run: async (args, ctx, server) => {
      if (!clientCaps(server, ctx).sampling) return { isError: true, ...text('the client does not support sampling') };
      const reply = sampled(ctx, 'sampling');
      if (reply === undefined) return inputRequired({ inputRequests: { sampling: sample(String(args.prompt ?? '')) } });
      return text(`LLM response: ${reply}`);
    },
  },
  test_elicitation: {
    description: 'Asks the user (through the client) for a username and an email address',
    inputSchema: { type: 'object', properties: { message: { type: 'string', description: 'The message to show the user' } }, required: ['message'] },
    run: async (args, ctx, server) => {
      if (!clientCaps(server, ctx).elicitation) return { isError: true, ...text('the client does not support elicitation') };
      const answer = elicitAnswer(ctx, 'user');
      if (!answer) {
        return inputRequired({
          inputRequests: {
            user: elicit(String(args.message ?? ''), {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            }),
          },
        });
      }
      return text(`User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
    },
  },
  test_elicitation_sep1034_defaults: {
    description: 'Elicits a form whose fields of every primitive type have defaults',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => elicitForm(ctx, 'Please review and confirm these values', {
      name: { type: 'string', description: 'User name', default: 'John Doe' },
      age: { type: 'integer', description: 'User age', default: 30 },
      score: { type: 'number', description: 'User score', default: 95.5 },
      status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
      verified: { type: 'boolean', description: 'Verification status', default: true },
    }),
  },
  test_elicitation_sep1330_enums: {
    description: 'Elicits a form with the five enum variants of SEP-1330',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => elicitForm(ctx, 'Please pick some options', {
      untitledSingle: { type: 'string', description: 'Untitled single-select', enum: ['option1', 'option2', 'option3'] },
      titledSingle: {
        type: 'string', description: 'Titled single-select',
        oneOf: [{ const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }],
      },
      legacyEnum: {
        type: 'string', description: 'Legacy titled single-select',
        enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'],
      },
      untitledMulti: {
        type: 'array', description: 'Untitled multi-select',
        items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
      },
      titledMulti: {
        type: 'array', description: 'Titled multi-select',
        items: { anyOf: [{ const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] },
      },
    }),
  },
  test_reconnection: {
    // 2025 sessions over HTTP (with the event store) let the tool close the call's SSE stream
    // mid-way so the client must resume with Last-Event-ID (SEP-1699, server-sse-polling); over
    // stdio and on 2026 requests there is no stream to close.
    description: 'Closes the SSE stream of this call mid-way, then answers',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      await sleep(50);
      ctx.http?.closeSSE?.();
      await sleep(200);
      return text('Reconnection test completed successfully');
    },
  },

  // --- 2026 scenarios: server-stateless diagnostics ---
  test_missing_capability: {
    // Needs the client's sampling capability: a request whose envelope does not declare it is
    // refused by the SDK's input_required gate with -32021 MissingRequiredClientCapability
    // (data.requiredCapabilities = { sampling: {} }, HTTP 400).
    description: 'Needs the sampling capability (asks the client to sample once)',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const reply = sampled(ctx, 'sampling');
      if (reply === undefined) return inputRequired({ inputRequests: { sampling: sample('Say hello') } });
      return text(`Sampled: ${reply}`);
    },
  },
  test_streaming_elicitation: {
    // Its answer is an input_required result (never an independent server->client request on
    // the response stream), then a complete result once the client answers.
    description: 'Asks for a confirmation through an input_required result',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const answer = elicitAnswer(ctx, 'confirm');
      if (!answer) return inputRequired({ inputRequests: { confirm: elicit('Continue?', { ok: { type: 'boolean' } }) } });
      return text(`Streaming elicitation finished: action=${answer.action}`);
    },
  },
  test_logging_tool: {
    // Logs at info; the SDK sends those only to requests whose _meta asks for a log level
    // (io.modelcontextprotocol/logLevel) on 2026, or per logging/setLevel on 2025.
    description: 'Logs three info messages while it runs',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      for (const step of ['started', 'running', 'finished']) await ctx.mcpReq.log('info', `logging tool ${step}`, 'dual-era');
      return text('Logging tool finished');
    },
  },
  test_trigger_tool_change: {
    description: 'Announces a change of the tool list (notifications/tools/list_changed)',
    inputSchema: NO_ARGS,
    run: async (args, ctx, server, env) => {
      await env.toolsChanged();
      return text('Tool list change announced');
    },
  },
  test_trigger_prompt_change: {
    description: 'Announces a change of the prompt list (notifications/prompts/list_changed)',
    inputSchema: NO_ARGS,
    run: async (args, ctx, server, env) => {
      await env.promptsChanged();
      return text('Prompt list change announced');
    },
  },

  // --- 2026 scenarios: input_required results (SEP-2322) ---
  test_input_required_result_elicitation: {
    description: 'Asks for the user name (input_required with one elicitation), then greets',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const answer = accepted(ctx, 'user_name');
      if (typeof answer?.name !== 'string') {
        return inputRequired({ inputRequests: { user_name: elicit('What is your name?', { name: { type: 'string' } }) } });
      }
      return text(`Hello, ${answer.name}!`);
    },
  },
  test_input_required_result_sampling: {
    description: 'Asks the client to sample an answer (input_required with one sampling request)',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const reply = sampled(ctx, 'capital_question');
      if (reply === undefined) return inputRequired({ inputRequests: { capital_question: sample('What is the capital of France?') } });
      return text(`The model answered: ${reply}`);
    },
  },
  test_input_required_result_list_roots: {
    description: 'Asks the client for its roots (input_required with roots/list)',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const list = roots(ctx, 'client_roots');
      if (!list) return inputRequired({ inputRequests: { client_roots: listRoots() } });
      return text(`Client roots: ${list.map((r) => r.uri).join(', ') || '(none)'}`);
    },
  },
  test_input_required_result_request_state: {
    description: 'Asks for a confirmation with an HMAC-protected requestState, then checks it',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const state = ctx.mcpReq.requestState();
      const answer = accepted(ctx, 'confirm');
      if (state?.tool === 'request_state' && answer) return text(`state-ok: confirmed=${answer.ok}`);
      return inputRequired({
        inputRequests: { confirm: elicit('Please confirm', { ok: { type: 'boolean' } }) },
        requestState: await stateCodec.mint({ tool: 'request_state', issued: Date.now() }),
      });
    },
  },
  test_input_required_result_multiple_inputs: {
    description: 'Asks for an elicitation, a sampling and the roots at once, with requestState',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const name = accepted(ctx, 'user_name')?.name;
      const greeting = sampled(ctx, 'greeting');
      const list = roots(ctx, 'client_roots');
      if (ctx.mcpReq.requestState()?.tool === 'multiple_inputs' && name !== undefined && greeting !== undefined && list) {
        return text(`name=${name}; greeting=${greeting}; roots=${list.map((r) => r.uri).join(',')}`);
      }
      return inputRequired({
        inputRequests: {
          user_name: elicit('What is your name?', { name: { type: 'string' } }),
          greeting: sample('Generate a greeting', 50),
          client_roots: listRoots(),
        },
        requestState: await stateCodec.mint({ tool: 'multiple_inputs' }),
      });
    },
  },
  test_input_required_result_multi_round: {
    description: 'Two rounds of questions (name, then colour), each with a new requestState',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const state = ctx.mcpReq.requestState();
      const step1 = async () => inputRequired({
        inputRequests: { step1: elicit('Step 1: What is your name?', { name: { type: 'string' } }) },
        requestState: await stateCodec.mint({ tool: 'multi_round', step: 1 }),
      });
      const step2 = async (name) => inputRequired({
        inputRequests: { step2: elicit('Step 2: What is your favorite color?', { color: { type: 'string' } }) },
        requestState: await stateCodec.mint({ tool: 'multi_round', step: 2, name }),
      });
      if (state?.tool !== 'multi_round') return step1();
      if (state.step === 1) {
        const name = accepted(ctx, 'step1')?.name;
        return name === undefined ? step1() : step2(name);
      }
      const color = accepted(ctx, 'step2')?.color;
      if (color === undefined) return step2(state.name);
      return text(`${state.name} likes ${color}`);
    },
  },
  test_input_required_result_tampered_state: {
    description: 'Asks for a confirmation with an HMAC-protected requestState (tampering is refused)',
    inputSchema: NO_ARGS,
    run: async (args, ctx) => {
      const state = ctx.mcpReq.requestState();
      const answer = accepted(ctx, 'confirm');
      if (state?.tool === 'tampered_state' && answer) return text(`state verified: confirmed=${answer.ok}`);
      return inputRequired({
        inputRequests: { confirm: elicit('Please confirm', { ok: { type: 'boolean' } }) },
        requestState: await stateCodec.mint({ tool: 'tampered_state' }),
      });
    },
  },
  test_input_required_result_capabilities: {
    description: 'Asks only for what the client declared it can do (elicitation and/or sampling)',
    inputSchema: NO_ARGS,
    run: async (args, ctx, server) => {
      const caps = clientCaps(server, ctx);
      const inputRequests = {};
      if (caps.elicitation && !accepted(ctx, 'elicit_input')) inputRequests.elicit_input = elicit('What is your name?', { name: { type: 'string' } });
      if (caps.sampling && sampled(ctx, 'sample_input') === undefined) inputRequests.sample_input = sample('Say something');
      if (Object.keys(inputRequests).length) return inputRequired({ inputRequests });
      return text(`Done (the client declared: ${Object.keys(caps).join(', ') || 'nothing'})`);
    },
  },
};

const RESOURCES = {
  'test://static-text': {
    name: 'static-text', description: 'A static text resource', mimeType: 'text/plain',
    read: (uri) => ({ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }),
  },
  'test://static-binary': {
    name: 'static-binary', description: 'A static binary resource (a 1x1 red PNG)', mimeType: 'image/png',
    read: (uri) => ({ uri, mimeType: 'image/png', blob: RED_PIXEL_PNG }),
  },
  'test://watched-resource': {
    name: 'watched-resource', description: 'A resource clients can subscribe to', mimeType: 'text/plain',
    read: (uri) => ({ uri, mimeType: 'text/plain', text: 'Watched resource content.' }),
  },
};
const TEMPLATE = /^test:\/\/template\/([^/]+)\/data$/;

const PROMPTS = {
  test_simple_prompt: {
    description: 'A prompt without arguments',
    get: () => [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  },
  test_prompt_with_arguments: {
    description: 'A prompt with two required arguments',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
    ],
    get: (a) => [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'` } }],
  },
  test_prompt_with_embedded_resource: {
    description: 'A prompt that embeds the resource it is given',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    get: (a) => [
      { role: 'user', content: { type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
      { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
    ],
  },
  test_prompt_with_image: {
    description: 'A prompt with an image',
    get: () => [
      { role: 'user', content: { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  },
  test_input_required_result_prompt: {
    // input_required on a non-tool request (prompts/get), 2026 scenario -non-tool-request.
    description: 'A prompt that first asks the user for context',
    get: (a, ctx) => {
      const context = accepted(ctx, 'user_context')?.context;
      if (typeof context !== 'string') {
        return inputRequired({ inputRequests: { user_context: elicit('What context should the prompt use?', { context: { type: 'string' } }) } });
      }
      return [{ role: 'user', content: { type: 'text', text: `Prompt with context: ${context}` } }];
    },
  },
};

// Completion candidates per argument name; the request's partial value filters them.
const COMPLETIONS = {
  arg1: ['paris', 'park', 'party', 'hello'],
  arg2: ['world', 'wonder'],
  id: ['123', '124', '200'],
  resourceUri: ['test://static-text', 'test://static-binary', 'test://watched-resource'],
};

// ---------------------------------------------------------------------------------------------
// The server factory: one definition for both eras (McpServerFactory of createMcpHandler and
// serveStdio: `era` is 'modern' for 2026-07-28 traffic, 'legacy' for 2025).

/** `env.toolsChanged()` / `env.promptsChanged()`: how list changes reach clients (set per mode). */
let announce = {
  toolsChanged: async (server) => server.sendToolListChanged(),
  promptsChanged: async (server) => server.sendPromptListChanged(),
};

function createDualEraServer({ era } = {}) {
  const legacyOnly = eraOnly === '2025';
  const server = new Server(
    { name: 'warden-dual-era-conformance', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        completions: {},
        logging: {},
      },
      // Cache hints for the 2026 cacheable results (SEP-2549); 2025 answers never carry them.
      cacheHints: {
        'tools/list': { ttlMs: 60000, cacheScope: 'public' },
        'prompts/list': { ttlMs: 60000, cacheScope: 'public' },
        'resources/list': { ttlMs: 60000, cacheScope: 'public' },
        'resources/templates/list': { ttlMs: 60000, cacheScope: 'public' },
        'resources/read': { ttlMs: 0, cacheScope: 'private' },
        'server/discover': { ttlMs: 60000, cacheScope: 'public' },
      },
      requestState: { verify: stateCodec.verify },
      ...(legacyOnly && { supportedProtocolVersions: LEGACY_VERSIONS }),
    },
  );
  const env = {
    toolsChanged: () => announce.toolsChanged(server),
    promptsChanged: () => announce.promptsChanged(server),
  };
  const subscriptions = new Set();

  server.setRequestHandler('tools/list', async () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => ({ name, description: t.description, inputSchema: t.inputSchema })),
  }));
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const tool = TOOLS[request.params.name];
    if (!tool) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    const result = await tool.run(request.params.arguments ?? {}, ctx, server, env);
    return result.resultType === 'input_required' ? result : server.projectCallToolResult(result, undefined);
  });

  server.setRequestHandler('resources/list', async () => ({
    resources: Object.entries(RESOURCES).map(([uri, r]) => ({ uri, name: r.name, description: r.description, mimeType: r.mimeType })),
  }));
  server.setRequestHandler('resources/templates/list', async () => ({
    resourceTemplates: [{
      uriTemplate: 'test://template/{id}/data', name: 'template-data',
      description: 'JSON data for the given id', mimeType: 'application/json',
    }],
  }));
  server.setRequestHandler('resources/read', async (request) => {
    const { uri } = request.params;
    if (RESOURCES[uri]) return { contents: [RESOURCES[uri].read(uri)] };
    const m = TEMPLATE.exec(uri);
    if (m) {
      const id = decodeURIComponent(m[1]);
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] };
    }
    throw new ResourceNotFoundError(uri); // -32602 with data.uri (SEP-2164)
  });
  if (era !== 'modern') {
    // resources/subscribe and /unsubscribe exist on 2025 sessions only (2026 has subscriptions/listen).
    server.setRequestHandler('resources/subscribe', async (request) => {
      subscriptions.add(request.params.uri);
      return {};
    });
    server.setRequestHandler('resources/unsubscribe', async (request) => {
      subscriptions.delete(request.params.uri);
      return {};
    });
  }

  server.setRequestHandler('prompts/list', async () => ({
    prompts: Object.entries(PROMPTS).map(([name, p]) => ({ name, description: p.description, ...(p.arguments && { arguments: p.arguments }) })),
  }));
  server.setRequestHandler('prompts/get', async (request, ctx) => {
    const prompt = PROMPTS[request.params.name];
    if (!prompt) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
    const args = request.params.arguments ?? {};
    for (const a of prompt.arguments ?? []) {
      if (a.required && args[a.name] === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Missing argument: ${a.name}`);
    }
    const messages = await prompt.get(args, ctx);
    if (!Array.isArray(messages)) return messages; // an input_required result
    return { description: prompt.description, messages };
  });

  server.setRequestHandler('completion/complete', async (request) => {
    const { name, value } = request.params.argument;
    const values = (COMPLETIONS[name] ?? []).filter((v) => v.startsWith(value ?? ''));
    return { completion: { values, total: values.length, hasMore: false } };
  });

  return server;
}

// ---------------------------------------------------------------------------------------------
// stdio

if (mode === 'stdio') {
  if (eraOnly === '2025') {
    // One 2025-era server on the process's stdio, as an SDK 1.x server would be.
    await createDualEraServer({ era: 'legacy' }).connect(new StdioServerTransport());
  } else {
    serveStdio(createDualEraServer, { onerror: (e) => process.stderr.write(`dual-era: ${e.message}\n`) });
  }
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP

// Keeps every event of a 2025 session so a client can resume a stream with Last-Event-ID.
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

const jsonRpcError = (status, code, message, id = null) =>
  Response.json({ jsonrpc: '2.0', error: { code, message }, id }, { status });

/** 2025 sessions: one server and one sessionful transport per Mcp-Session-Id. */
function createLegacySessions() {
  const sessions = new Map();
  return async function serveLegacy(request) {
    const sessionId = request.headers.get('mcp-session-id');
    let transport = sessionId ? sessions.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId) return jsonRpcError(404, -32001, 'Session not found');
      if (request.method !== 'POST') return jsonRpcError(400, -32000, 'Bad Request: No valid session ID provided');
      let body;
      try {
        body = await request.clone().json();
      } catch {
        return jsonRpcError(400, -32700, 'Parse error: the request body is not valid JSON');
      }
      if (!isInitializeRequest(body)) return jsonRpcError(400, -32000, 'Bad Request: No valid session ID provided', body?.id ?? null);
      transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new MemoryEventStore(),
        retryInterval: 500,
        onsessioninitialized: (sid) => sessions.set(sid, transport),
        onsessionclosed: (sid) => sessions.delete(sid),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await createDualEraServer({ era: 'legacy' }).connect(transport);
    }
    return transport.handleRequest(request);
  };
}

function createFetchHandler() {
  const serveLegacy = createLegacySessions();
  const onerror = process.env.DUAL_ERA_DEBUG ? (e) => process.stderr.write(`dual-era: ${e.message}\n`) : undefined;
  const modern = eraOnly === '2025' ? undefined : createMcpHandler(createDualEraServer, { legacy: 'reject', onerror });
  if (modern) {
    // On 2026 requests list changes go to the open subscriptions/listen streams.
    announce = {
      toolsChanged: async (server) => (server.getNegotiatedProtocolVersion() === '2026-07-28' ? modern.notify.toolsChanged() : server.sendToolListChanged()),
      promptsChanged: async (server) => (server.getNegotiatedProtocolVersion() === '2026-07-28' ? modern.notify.promptsChanged() : server.sendPromptListChanged()),
    };
  }
  return async (request) => {
    // DNS-rebinding protection: only localhost Host and Origin values.
    const rejected = hostHeaderValidationResponse(request, localhostAllowedHostnames())
      ?? originValidationResponse(request, localhostAllowedOrigins());
    if (rejected) return rejected;
    if (new URL(request.url).pathname !== '/mcp') return new Response('Not Found', { status: 404 });
    if (!modern || (await isLegacyRequest(request))) return serveLegacy(request);
    return modern.fetch(request);
  };
}

/** Serves a fetch-shaped handler on node:http (what @modelcontextprotocol/node's toNodeHandler does). */
function listen(fetchHandler, listenPort) {
  const server = createServer(async (req, res) => {
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    try {
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) for (const x of v) headers.append(k, x);
        else if (v !== undefined) headers.set(k, v);
      }
      const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
      const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
        method: req.method,
        headers,
        body: hasBody ? Readable.toWeb(req) : undefined,
        duplex: hasBody ? 'half' : undefined,
        signal: abort.signal,
      });
      const response = await fetchHandler(request);
      res.writeHead(response.status, [...response.headers].flat());
      res.flushHeaders();
      if (response.body) {
        for await (const chunk of response.body) {
          if (res.destroyed) break;
          res.write(chunk);
        }
      }
      res.end();
    } catch (e) {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: String(e?.message ?? e) }, id: null }));
      } else {
        res.destroy();
      }
    }
  });
  server.listen(listenPort, '127.0.0.1', () => {
    process.stderr.write(`dual-era: MCP endpoint http://127.0.0.1:${server.address().port}/mcp\n`);
  });
  return server;
}

if (mode === 'http') {
  const httpServer = listen(createFetchHandler(), port);
  const stop = () => httpServer.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
