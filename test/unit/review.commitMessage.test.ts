import * as assert from 'node:assert/strict';
import { commitMessage, commitSubject, MAX_LISTED_PATHS } from '../../src/core/review/commitMessage';

describe('review: commit message', () => {
  it('is about the change: the title as subject, the changed files grouped and counted, then the trailer', () => {
    const msg = commitMessage({ id: 't_abc', title: 'Add input validation' }, [
      { path: 'src/form.ts', status: 'modified' },
      { path: 'src/check.ts', status: 'added' },
      { path: 'old/legacy.ts', status: 'deleted' },
      { path: 'README.md', status: 'modified' },
    ]);
    assert.equal(
      msg,
      [
        'Add input validation',
        '',
        '4 files changed: 1 added, 2 modified, 1 deleted',
        '',
        'Added:',
        '- src/check.ts',
        '',
        'Modified:',
        '- README.md',
        '- src/form.ts',
        '',
        'Deleted:',
        '- old/legacy.ts',
        '',
        'Waypoint-Task: t_abc',
        '',
      ].join('\n'),
    );
  });

  it('carries no step summary written for the agent, and the task id only in the trailer', () => {
    const msg = commitMessage({ id: 't_0mx9fw3ys1uhpan', title: 'Add a maxLength check' }, [{ path: 'src/signup.ts', status: 'modified' }]);
    assert.doesNotMatch(msg, /no length limit yet|summary/i);
    const lines = msg.trimEnd().split('\n');
    assert.equal(lines.filter((l) => l.includes('t_0mx9fw3ys1uhpan')).length, 1);
    assert.equal(lines.at(-1), 'Waypoint-Task: t_0mx9fw3ys1uhpan');
    assert.equal(lines.at(-2), '', 'the trailer is a paragraph of its own');
  });

  it('caps the listed paths, each group saying how many more it has', () => {
    const files = [
      ...Array.from({ length: 30 }, (_, i) => ({ path: `src/m${String(i).padStart(2, '0')}.ts`, status: 'added' as const })),
      { path: 'package.json', status: 'modified' as const },
    ];
    const msg = commitMessage({ id: 't', title: 'Add many modules' }, files);
    assert.match(msg, /^31 files changed: 30 added, 1 modified$/m);
    assert.equal(msg.split('\n').filter((l) => /^- src\/m\d+\.ts$/.test(l)).length, MAX_LISTED_PATHS);
    assert.match(msg, /^- … and 10 more$/m);
    assert.match(msg, /Modified:\n- … and 1 more\n/);
  });

  it('with no file, the subject and the trailer alone', () => {
    assert.equal(commitMessage({ id: 't_1', title: 'Tidy up' }, []), 'Tidy up\n\nWaypoint-Task: t_1\n');
  });

  it('the subject is one imperative line of at most 72 characters, cut at a word', () => {
    assert.equal(commitSubject('Added a maxLength check.'), 'Add a maxLength check');
    assert.equal(commitSubject('fixing the off-by-one bug'), 'Fix the off-by-one bug');
    assert.equal(commitSubject('Updates the README'), 'Update the README');
    assert.equal(commitSubject('Changes to the parser'), 'Changes to the parser', 'a noun is left as it is');
    assert.equal(commitSubject('iOS: keep the keyboard up'), 'iOS: keep the keyboard up');
    const long = commitSubject(`a\nb ${'word '.repeat(30)}`);
    assert.ok(long.length <= 72, long);
    assert.ok(long.startsWith('A b word'));
    assert.ok(long.endsWith('word…'), long);
  });
});
