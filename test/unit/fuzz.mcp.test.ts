import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Engine } from '../../src/core/engine/engine';
import { localApi } from '../../src/core/engine/api';
import { dumpProjections } from '../../src/core/store/projections';
import { headlessRollback } from '../../src/mcp/headlessRollback';
import { createMcpServer, localDispatch } from '../../src/mcp/server';
import { TOOLS } from '../../src/mcp/tools';
import { assertNoPollution, assertReadable, fuzzParams, hostileJson, listingOutside, PROTO_KEYS } from '../support/fuzz';
import { tmpDir } from '../support/tmp';
import { embeddedStore } from '../support/embedded';

/**
 * Random and adversarial arguments to every Waypoint MCP tool, through the official
 * SDK Client connected to the real server (the same createMcpServer + localDispatch
 * that `waypoint mcp` and `waypoint serve` run) over the SDK's in-memory transport,
 * on a real engine and store. Arguments are JSON round-tripped first, so an own
 * `__proto__` key arrives exactly as a wire delivers it.
 *
 * Invariants: the server never crashes; every refused call is a tool error with a
 * readable message (never "failed internally"); a refused call leaves the event log
 * and every projection as they were; an argument the schema does not name is
 * refused; nothing reaches Object.prototype; nothing is written outside the workspace.
 */
type Json = Record<string, unknown>;

describe('fuzz: MCP tool arguments (SDK client → real server → real store)', function () {
  this.timeout(300_000);
  let sandbox: ReturnType<typeof tmpDir>;
  let ws: string;
  let engine: Engine;
  let server: McpServer;
  let client: Client;
  const ids = { taskId: '', checkpointId: '', stepId: 'a', key: 'deploy:staging' };

  before(async () => {
    sandbox = tmpDir('wp-fuzz-mcp-');
    ws = path.join(sandbox.dir, 'ws');
    fs.mkdirSync(path.join(ws, 'src'), { recursive: true });
    fs.writeFileSync(path.join(ws, 'src', 'a.ts'), 'export const a = 1;\n');
    engine = await Engine.open({ workspace: ws, store: { lock: { waitMs: 200 } } });
    server = createMcpServer(localDispatch({ engine: localApi(engine), owner: { id: 'fuzz-agent' }, agentRollback: 'allow', rollback: headlessRollback(engine) }));
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    client = new Client({ name: 'waypoint-fuzz', version: '1.0.0' });
    await client.connect(clientSide);
    // A real task for valid-looking calls to hit: a plan, a step in progress, a checkpoint, a side effect.
    const start = (await client.callTool({ name: 'waypoint_task_start', arguments: { goal: 'fuzz target', plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }] } })) as CallToolResult;
    ids.taskId = (start.structuredContent as Json).taskId as string;
    await client.callTool({ name: 'waypoint_step_start', arguments: { taskId: ids.taskId, stepId: 'a' } });
    const cp = (await client.callTool({ name: 'waypoint_checkpoint', arguments: { taskId: ids.taskId, label: 'fuzz' } })) as CallToolResult;
    ids.checkpointId = (cp.structuredContent as Json).checkpointId as string;
    await client.callTool({ name: 'waypoint_side_effect_begin', arguments: { taskId: ids.taskId, key: ids.key, kind: 'shell', description: 'deploy' } });
  });

  after(async () => {
    await client?.close().catch(() => undefined);
    await engine?.close();
    sandbox?.cleanup();
  });

  /** Plausible arguments for each tool against the task above, the base a mutation starts from. */
  const valid = (): Record<string, Json> => ({
    waypoint_task_start: { goal: 'another goal', plan: [{ id: 'x', title: 'X' }], agent: 'fuzz', idempotencyKey: 'fuzz-job' },
    waypoint_step_start: { taskId: ids.taskId, stepId: 'b', title: 'B', inputs: { n: 1 } },
    waypoint_step_complete: { taskId: ids.taskId, stepId: ids.stepId, outputs: { ok: true }, summary: 'done' },
    waypoint_step_fail: { taskId: ids.taskId, stepId: ids.stepId, error: 'boom', recoverable: true },
    waypoint_checkpoint: { taskId: ids.taskId, label: 'more' },
    waypoint_side_effect_begin: { taskId: ids.taskId, key: 'k2', kind: 'http', description: 'POST', args: { url: 'http://127.0.0.1/' } },
    waypoint_side_effect_end: { taskId: ids.taskId, key: ids.key, ok: true, result: { id: 1 } },
    waypoint_task_resume: { taskId: ids.taskId },
    waypoint_task_status: { taskId: ids.taskId },
    waypoint_task_complete: { taskId: ids.taskId, summary: 'all done' },
    waypoint_rollback: { taskId: ids.taskId, checkpointId: ids.checkpointId, reason: 'fuzz' },
  });

  const toolName = fc.constantFrom(...TOOLS.map((t) => t.name));
  const extraKey = fc.constantFrom(...PROTO_KEYS, 'extra', 'taskid', 'toString', 'hasOwnProperty', '');

  /** One call: a tool and its arguments, as a mutation of valid ones or as random keys. */
  const call = toolName.chain((name) => {
    const keys = Object.keys(TOOLS.find((t) => t.name === name)!.input.shape);
    const mutate = fc.record({
      set: fc.array(fc.tuple(fc.oneof(fc.constantFrom(...keys), extraKey), hostileJson), { maxLength: 3 }),
      drop: fc.subarray(keys, { maxLength: Math.min(2, keys.length) }),
    });
    const random = fc.dictionary(fc.oneof(fc.constantFrom(...keys), extraKey, fc.string({ maxLength: 8 })), hostileJson, { maxKeys: 6 });
    return fc.tuple(fc.constant(name), fc.oneof(mutate.map((m) => ({ kind: 'mutate' as const, ...m })), random.map((r) => ({ kind: 'random' as const, r }))));
  });

  function build(name: string, spec: { kind: 'mutate'; set: [string, unknown][]; drop: string[] } | { kind: 'random'; r: Record<string, unknown> }): unknown {
    let text: string;
    if (spec.kind === 'random') {
      text = JSON.stringify(spec.r);
    } else {
      // Built as JSON text so a key such as __proto__ is an own key, as on the wire.
      const base = { ...valid()[name] };
      for (const k of spec.drop) delete base[k];
      const parts = Object.entries(base).filter(([k]) => !spec.set.some(([s]) => s === k)).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
      for (const [k, v] of spec.set) parts.push(`${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`);
      text = `{${parts.join(',')}}`;
    }
    return JSON.parse(text);
  }

  const state = () => ({ seq: engine.eventLog.lastSeq, projections: dumpProjections(embeddedStore(engine).db) });

  it('every tool: bad calls are readable tool errors that change nothing; the server never falls over', async () => {
    const outsideBefore = listingOutside(sandbox.dir, ws);
    let refused = 0;
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(call, async ([name, spec]) => {
        const args = build(name, spec);
        const before = state();
        const res = (await client.callTool({ name, arguments: args as Json })) as CallToolResult;
        assertNoPollution(`${name}`);
        const ownKeys = Object.keys(args as Json);
        const known = Object.keys(TOOLS.find((t) => t.name === name)!.input.shape);
        // The SDK's own request parsing drops an own __proto__ key before any schema sees it (and pollutes nothing).
        const unknown = ownKeys.filter((k) => !known.includes(k) && k !== '__proto__');
        if (res.isError) {
          refused++;
          const text = (res.content as { type: string; text: string }[]).map((c) => c.text).join('\n');
          assertReadable(text, name);
          assert.doesNotMatch(text, /failed internally/, `${name} failed internally on ${JSON.stringify(args).slice(0, 300)}: ${text}`);
          const after = state();
          assert.equal(after.seq, before.seq, `${name} refused (${text.slice(0, 200)}) but appended events`);
          assert.deepEqual(after.projections, before.projections, `${name} refused but changed a projection`);
        } else {
          accepted++;
          assert.deepEqual(unknown, [], `${name} accepted unknown argument(s) ${JSON.stringify(unknown)}`);
          assert.ok(res.structuredContent, `${name} succeeded without structured content`);
        }
      }),
      fuzzParams(300),
    );
    // Both sides of the property were exercised, and the server still answers.
    assert.ok(refused > 50, `only ${refused} refusals`);
    assert.ok(accepted > 5, `only ${accepted} successes`);
    const status = (await client.callTool({ name: 'waypoint_task_status', arguments: {} })) as CallToolResult;
    assert.equal(status.isError, undefined);
    assert.deepEqual(listingOutside(sandbox.dir, ws), outsideBefore, 'nothing is written outside the workspace');
    const verify = await engine.verify();
    assert.ok(verify.ok, `projections equal a rebuild from events: ${JSON.stringify(verify.differences)}`);
  });

  it('non-object arguments and unknown tools are protocol or tool errors, never a crash', async () => {
    for (const args of [5, 'x', [1, 2], true]) {
      const r = await client.callTool({ name: 'waypoint_task_status', arguments: args as never }).then(
        (res) => ({ ok: true as const, res: res as CallToolResult }),
        (e: Error) => ({ ok: false as const, e }),
      );
      if (r.ok) assert.equal(r.res.isError, true, `arguments ${JSON.stringify(args)} accepted`);
      else assertReadable(r.e.message, `arguments ${JSON.stringify(args)}`);
    }
    const unknown = (await client.callTool({ name: 'waypoint_nope', arguments: {} })) as CallToolResult;
    assert.equal(unknown.isError, true);
    const status = (await client.callTool({ name: 'waypoint_task_status', arguments: { taskId: ids.taskId } })) as CallToolResult;
    assert.equal(status.isError, undefined, 'the server still answers');
  });
});
