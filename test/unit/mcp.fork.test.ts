import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { localApi } from '../../src/core/engine/api';
import type { Engine } from '../../src/core/engine/engine';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { createMcpServer, localDispatch } from '../../src/mcp/server';
import { runTool, TOOLS, type AgentRollbackPolicy, type ToolContext } from '../../src/mcp/tools';
import { openEngine, tmpDir } from '../support/tmp';

/** waypoint_fork: the setting that governs agents' rollbacks governs their forks; a preview is always allowed. */
describe('mcp: waypoint_fork', function () {
  this.timeout(30_000);
  let ws: ReturnType<typeof tmpDir>;
  let engine: Engine;
  let checkpointId: string;
  let taskId: string;
  const tool = TOOLS.find((t) => t.name === 'waypoint_fork')!;
  const ctx = (agentRollback: AgentRollbackPolicy): ToolContext => ({ engine: localApi(engine), owner: { id: 'mcp-test' }, agentRollback });
  const text = (r: Awaited<ReturnType<typeof runTool>>) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

  beforeEach(async () => {
    ws = tmpDir('wp-mcp-fork-');
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), '1\n');
    engine = await openEngine(ws.dir);
    taskId = (await engine.startTask({ goal: 'the original', plan: [{ id: 'one', title: 'One' }, { id: 'two', title: 'Two' }] })).taskId;
    await engine.startStep({ taskId, stepId: 'one' });
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), '2\n');
    checkpointId = (await engine.completeStep({ taskId, stepId: 'one', outputs: { n: 2 } })).checkpointId;
    fs.writeFileSync(path.join(ws.dir, 'a.txt'), '3\n');
  });
  afterEach(async () => {
    await engine.close();
    ws.cleanup();
  });

  it('under ask and deny: refused with the way forward, nothing changed; a preview still answers', async () => {
    const n = engine.eventLog.lastSeq;
    for (const policy of ['ask', 'deny'] as const) {
      const r = await runTool(tool, ctx(policy), { checkpointId });
      assert.equal(r.isError, true);
      assert.match(text(r), new RegExp(`agentRollback = ${policy}.*Waypoint: Fork Task from Checkpoint`));
    }
    const p = await runTool(tool, ctx('deny'), { checkpointId, preview: true });
    assert.equal(p.isError, undefined, text(p));
    assert.match(text(p), /would change 1 file; it inherits one/);
    assert.equal(engine.eventLog.lastSeq, n);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8'), '3\n');
  });

  it('under allow: forks and answers with the new task and its resume context (what it inherits)', async () => {
    const r = await runTool(tool, ctx('allow'), { checkpointId, goal: 'another way', idempotencyKey: 'k1' });
    assert.equal(r.isError, undefined, text(r));
    const s = r.structuredContent as { taskId: string; forkedFrom: { taskId: string }; resumeContext: { forkedFrom: { inheritance: { inherited: { id: string }[] } } } };
    assert.equal(s.forkedFrom.taskId, taskId);
    assert.deepEqual(s.resumeContext.forkedFrom.inheritance.inherited.map((x) => x.id), ['one']);
    assert.match(text(r), /## Forked from/);
    assert.equal(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8'), '2\n');
    assert.equal(engine.task(s.taskId).lease?.owner, 'mcp-test', 'the calling session drives the fork');
  });

  it('refuses bad arguments at the door (the SDK, against the tool schema) before the engine sees them', async () => {
    // Through a real MCP client and server: the schema check happens once, where the call enters.
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const server = createMcpServer(localDispatch(ctx('allow')));
    await server.connect(serverSide);
    const client = new Client({ name: 'waypoint-fork-test', version: '1.0.0' });
    await client.connect(clientSide);
    const n = engine.eventLog.lastSeq;
    try {
      const r = (await client.callTool({ name: 'waypoint_fork', arguments: { checkpointId: '', goal: 'x' } })) as Awaited<ReturnType<typeof runTool>>;
      assert.equal(r.isError, true);
      assert.match(text(r), /Invalid arguments for tool waypoint_fork[\s\S]*checkpointId/);
    } finally {
      await client.close();
      await server.close();
    }
    assert.equal(engine.eventLog.lastSeq, n);
    const unknown = await runTool(tool, ctx('allow'), { checkpointId: 'c_nope' });
    assert.match(text(unknown), /Unknown checkpoint 'c_nope'/);
  });
});
