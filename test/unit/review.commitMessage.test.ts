import * as assert from 'node:assert/strict';
import { commitMessage } from '../../src/core/review/commitMessage';

describe('review: commit message', () => {
  it('uses the title, goal and completed step summaries, and ends with the trailer', () => {
    const msg = commitMessage({ id: 't_abc', title: 'Add input validation', goal: 'Validate the signup form so that empty emails are refused before they reach the server.', summary: null }, [
      { title: 'Read', summary: 'read form.ts', status: 'completed' },
      { title: 'Edit', summary: null, status: 'completed' },
      { title: 'Docs', summary: 'never ran', status: 'abandoned' },
    ]);
    const lines = msg.split('\n');
    assert.equal(lines[0], 'Add input validation');
    assert.equal(lines[1], '');
    assert.match(msg, /Validate the signup form so that empty emails are refused before they\nreach the server\./);
    assert.match(msg, /- read form\.ts\n- Edit\n/);
    assert.doesNotMatch(msg, /never ran/);
    assert.ok(msg.endsWith('\n\nWaypoint-Task: t_abc\n'));
  });

  it('keeps the subject on one line and short', () => {
    const msg = commitMessage({ id: 't', title: `a\nb ${'x'.repeat(100)}`, goal: '', summary: null }, []);
    const subject = msg.split('\n')[0];
    assert.ok(subject.length <= 72);
    assert.ok(subject.startsWith('a b '));
  });
});
