import * as assert from 'node:assert/strict';
import { alertNotice, interruptedAlert, parseTeamAlert, type TeamAlert } from '../../src/core/store/postgres/teamAlerts';

/** What a person is told about a team store alert: the pure decision the editor's listener shows. */

const base = { w: 'ws-1', machine: 'build-7', path: '/home/ci/billing', task: 'task-1', title: 'Billing migration', reason: 'lease of a expired at 2026-12-05T08:00:00.000Z (no call for 5 s)', owner: 'agent-session-7', at: 1_764_000_000_000, by: 'waypoint serve on m2 (pid 9)' };
const ctx = (o: Partial<Parameters<typeof alertNotice>[1]> = {}) => ({ ownWorkspaces: new Set<string>(), shown: new Set<string>(), muted: false, ...o });

describe('team store alerts', () => {
  it('round-trips a payload and words it for a person: task, machine, folder, why', () => {
    const a = parseTeamAlert(interruptedAlert(base))!;
    assert.equal(a.kind, 'task.interrupted');
    const n = alertNotice(a, ctx())!;
    assert.equal(n.message, 'Task "Billing migration" on build-7 (billing) was interrupted: its agent stopped answering.');
    assert.equal(n.own, false);
    assert.equal(n.taskId, 'task-1');
  });

  it("says 'in this workspace' for the window's own workspace", () => {
    const n = alertNotice(parseTeamAlert(interruptedAlert(base))!, ctx({ ownWorkspaces: new Set(['ws-1']) }))!;
    assert.equal(n.message, 'Task "Billing migration" in this workspace (billing) was interrupted: its agent stopped answering.');
    assert.equal(n.own, true);
  });

  it('tells each alert once, and nothing when muted', () => {
    const a = parseTeamAlert(interruptedAlert(base))!;
    const c = ctx();
    assert.ok(alertNotice(a, c));
    assert.equal(alertNotice(a, c), null);
    assert.ok(alertNotice({ ...a, at: a.at + 1 }, c), 'the same task interrupted again later is told again');
    assert.equal(alertNotice(parseTeamAlert(interruptedAlert({ ...base, task: 'task-2' }))!, ctx({ muted: true })), null);
  });

  it('escapes control characters and bidi overrides from the store; a blank title falls back to the id', () => {
    const a = parseTeamAlert(interruptedAlert({ ...base, title: 'evil\u202e\u001b[31m', machine: 'm\nx', path: 'C:\\work\\re\u200fpo' }))!;
    assert.equal(alertNotice(a, ctx())!.message, 'Task "evil\\u202e\\x1b[31m" on m\\nx (re\\u200fpo) was interrupted: its agent stopped answering.');
    assert.match(alertNotice(parseTeamAlert(interruptedAlert({ ...base, title: '  ' }))!, ctx())!.message, /^Task "task-1" on/);
  });

  it('bounds every field so a payload fits a NOTIFY, and refuses what is not an alert', () => {
    const long = interruptedAlert({ ...base, title: 'x'.repeat(10_000), path: '/p'.repeat(5000), reason: 'r'.repeat(9000) });
    assert.ok(Buffer.byteLength(long) < 8000);
    const a = parseTeamAlert(long) as TeamAlert;
    assert.equal(a.title.length, 200);
    for (const bad of [undefined, '', 'not json', '{"kind":"task.interrupted"}', JSON.stringify({ ...base, kind: 'task.deleted' }), JSON.stringify({ ...base, kind: 'task.interrupted', extra: 1 }), JSON.stringify({ ...base, kind: 'task.interrupted', title: 'x'.repeat(201) })]) {
      assert.equal(parseTeamAlert(bad), null, String(bad));
    }
  });
});
