#!/usr/bin/env node
// An MCP server (stdio) that implements what every SERVER scenario of @modelcontextprotocol/conformance
// expects of the server under test: the tool, resource and prompt names, contents and behaviours the
// scenario descriptions ask for (`conformance list --server`; each scenario's description states
// its "Server Implementation Requirements"). warden fronts it in conformance.test.mjs, so the suite
// judges warden's proxying of every MCP feature; serve-http.mjs serves the same server over the
// SDK's own Streamable HTTP transport to check the fixture itself against the suite.
//
// Written on the SDK's low-level Server so that every answer is exactly what the scenarios ask for
// (the high-level McpServer would rewrite input schemas, which json-schema-2020-12 checks verbatim).
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { pathToFileURL } from 'node:url';

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

// Each tool: the description and input schema tools/list shows, and what tools/call does.
const TOOLS = {
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
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  },
  test_tool_with_logging: {
    description: 'Sends three info log messages while it runs',
    inputSchema: NO_ARGS,
    run: async (args, extra) => {
      const log = (data) => extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'fixture', data } });
      await log('Tool execution started');
      await sleep(50);
      await log('Tool processing data');
      await sleep(50);
      await log('Tool execution completed');
      return text('Tool with logging executed successfully');
    },
  },
  test_error_handling: {
    description: 'Always fails with a tool error',
    inputSchema: NO_ARGS,
    run: async () => ({ isError: true, ...text('This tool intentionally returns an error for testing') }),
  },
  test_tool_with_progress: {
    description: 'Reports progress 0, 50 and 100 of 100 when given a progress token',
    inputSchema: NO_ARGS,
    run: async (args, extra) => {
      const token = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
        }
        if (progress < 100) await sleep(50);
      }
      return text('Tool with progress executed successfully');
    },
  },
  test_sampling: {
    description: 'Asks the client to sample an LLM with the given prompt',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } }, required: ['prompt'] },
    run: async (args, extra, server) => {
      if (!server.getClientCapabilities()?.sampling) return { isError: true, ...text('the client does not support sampling') };
      const result = await extra.sendRequest({
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt) } }], maxTokens: 100 },
      }, CreateMessageResultSchema);
      const reply = result.content?.type === 'text' ? result.content.text : JSON.stringify(result.content);
      return text(`LLM response: ${reply}`);
    },
  },
  test_elicitation: {
    description: 'Asks the user (through the client) for a username and an email address',
    inputSchema: { type: 'object', properties: { message: { type: 'string', description: 'The message to show the user' } }, required: ['message'] },
    run: async (args, extra, server) => {
      if (!server.getClientCapabilities()?.elicitation) return { isError: true, ...text('the client does not support elicitation') };
      const result = await extra.sendRequest({
        method: 'elicitation/create',
        params: {
          message: String(args.message),
          requestedSchema: {
            type: 'object',
            properties: {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            },
            required: ['username', 'email'],
          },
        },
      }, ElicitResultSchema);
      return text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
    },
  },
  test_elicitation_sep1034_defaults: {
    description: 'Elicits a form whose fields of every primitive type have defaults',
    inputSchema: NO_ARGS,
    run: async (args, extra) => elicitForm(extra, 'Please review and confirm these values', {
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
    run: async (args, extra) => elicitForm(extra, 'Please pick some options', {
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
  json_schema_2020_12_tool: {
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: {
        address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } },
      },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      additionalProperties: false,
    },
    run: async (args) => text(`Received: ${JSON.stringify(args)}`),
  },
  test_reconnection: {
    // Over HTTP (serve-http.mjs, with an event store) the SDK lets the tool close the request's SSE
    // stream mid-call so the client must resume with Last-Event-ID (SEP-1699); over stdio there is
    // no stream to close, and resumption is the business of whatever serves HTTP in front.
    description: 'Closes the SSE stream of this call mid-way, then answers',
    inputSchema: NO_ARGS,
    run: async (args, extra) => {
      await sleep(50);
      extra.closeSSEStream?.();
      await sleep(200);
      return text('Reconnection test completed successfully');
    },
  },
};

async function elicitForm(extra, message, properties) {
  const result = await extra.sendRequest({
    method: 'elicitation/create',
    params: { message, requestedSchema: { type: 'object', properties, required: [] } },
  }, ElicitResultSchema);
  return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
}

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
};

// Completion candidates per argument name; the request's partial value filters them.
const COMPLETIONS = {
  arg1: ['paris', 'park', 'party', 'hello'],
  arg2: ['world', 'wonder'],
  id: ['123', '124', '200'],
};

/** Builds one fixture server (one per HTTP session in serve-http.mjs; one per process over stdio). */
export function createFixtureServer() {
  const server = new Server(
    { name: 'warden-conformance-fixture', version: '1.0.0' },
    {
      capabilities: {
        tools: {},
        resources: { subscribe: true },
        prompts: {},
        completions: {},
        logging: {},
      },
    },
  );
  const subscriptions = new Set();

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => ({ name, description: t.description, inputSchema: t.inputSchema })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = TOOLS[request.params.name];
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `unknown tool: ${request.params.name}`);
    return tool.run(request.params.arguments ?? {}, extra, server);
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: Object.entries(RESOURCES).map(([uri, r]) => ({ uri, name: r.name, description: r.description, mimeType: r.mimeType })),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [{
      uriTemplate: 'test://template/{id}/data', name: 'template-data',
      description: 'JSON data for the given id', mimeType: 'application/json',
    }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    if (RESOURCES[uri]) return { contents: [RESOURCES[uri].read(uri)] };
    const m = TEMPLATE.exec(uri);
    if (m) {
      const id = decodeURIComponent(m[1]);
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] };
    }
    throw new McpError(-32002, `resource not found: ${uri}`);
  });
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscriptions.add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscriptions.delete(request.params.uri);
    return {};
  });

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: Object.entries(PROMPTS).map(([name, p]) => ({ name, description: p.description, ...(p.arguments && { arguments: p.arguments }) })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => {
    const prompt = PROMPTS[request.params.name];
    if (!prompt) throw new McpError(ErrorCode.InvalidParams, `unknown prompt: ${request.params.name}`);
    const args = request.params.arguments ?? {};
    for (const a of prompt.arguments ?? []) {
      if (a.required && args[a.name] === undefined) throw new McpError(ErrorCode.InvalidParams, `missing argument: ${a.name}`);
    }
    return { description: prompt.description, messages: prompt.get(args) };
  });

  server.setRequestHandler(CompleteRequestSchema, async (request) => {
    const { name, value } = request.params.argument;
    const values = (COMPLETIONS[name] ?? []).filter((v) => v.startsWith(value ?? ''));
    return { completion: { values, total: values.length, hasMore: false } };
  });

  return server;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = createFixtureServer();
  await server.connect(new StdioServerTransport());
}
