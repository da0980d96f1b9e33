import * as assert from 'node:assert/strict';
import { applyTodoSql, changesTodos } from '../../src/hooks/sqlTodos';
import { copilotCliAdapter } from '../../src/hooks/adapters/vscode';

/**
 * Copilot CLI's plan is SQL on its session's `todos` table; Waypoint replays that SQL on a
 * copy of the table as it knows it. These are the statements its system prompt teaches
 * (insert several, update by id or by condition, delete), and what must change nothing.
 */
describe('hook: Copilot CLI todos from its sql tool', () => {
  const two = [
    { id: 'greeting', content: 'Edit the greeting', status: 'in_progress' as const },
    { id: 'files', content: 'Generate the files', status: 'pending' as const },
  ];

  it('an insert of several rows and an update in one call: the table SQLite leaves', async () => {
    const after = await applyTodoSql([], "INSERT INTO todos (id, title, description) VALUES ('greeting', 'Edit the greeting', 'd'), ('files', 'Generate the files', 'e');\nUPDATE todos SET status = 'in_progress' WHERE id = 'greeting';");
    assert.deepEqual(after, two);
  });

  it('updates by any condition, done as completed, a deleted row gone', async () => {
    assert.deepEqual(await applyTodoSql(two, "UPDATE todos SET status = 'done' WHERE status = 'in_progress'"), [
      { id: 'greeting', content: 'Edit the greeting', status: 'completed' },
      { id: 'files', content: 'Generate the files', status: 'pending' },
    ]);
    assert.deepEqual(await applyTodoSql(two, "DELETE FROM todos WHERE id = 'files'"), [two[0]]);
    assert.deepEqual(await applyTodoSql(two, "INSERT INTO todo_deps (todo_id, depends_on) VALUES ('files', 'greeting')"), two, 'a dependency changes no item');
  });

  it('SQL that does not run on the copy changes nothing (null), and leaves the input as it was', async () => {
    const before = JSON.stringify(two);
    assert.equal(await applyTodoSql(two, "UPDATE todos SET status = 'finished' WHERE id = 'files'"), null, 'the table’s CHECK refuses an unknown status');
    assert.equal(await applyTodoSql(two, "INSERT INTO results SELECT * FROM todos"), null, 'a table of the session this copy does not have');
    assert.equal(JSON.stringify(two), before);
  });

  it('only a query that changes the todos is the plan tool; a read, another table or a recursive query is an ordinary call', () => {
    const call = (query: string) => {
      const e = copilotCliAdapter({ hook_event_name: 'PostToolUse', session_id: 's', tool_name: 'sql', tool_input: { description: 'd', query }, tool_result: { result_type: 'success' } }).event;
      return e.type === 'tool_after' ? e.call : undefined;
    };
    assert.equal(call("UPDATE todos SET status = 'done' WHERE id = 'a'")?.kind, 'todo');
    assert.equal(call("UPDATE todos SET status = 'done' WHERE id = 'a'")?.todoSql, "UPDATE todos SET status = 'done' WHERE id = 'a'");
    assert.equal(call("SELECT * FROM todos WHERE status = 'pending'")?.kind, 'other');
    assert.equal(call('INSERT INTO results VALUES (1)')?.kind, 'other');
    assert.equal(changesTodos("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) UPDATE todos SET title = (SELECT count(*) FROM c)"), false);
  });

  it('Edit with a raw patch names the patch’s files; Bash is a shell call', () => {
    const pre = (tool_name: string, tool_input: unknown) => {
      const e = copilotCliAdapter({ hook_event_name: 'PreToolUse', session_id: 's', tool_name, tool_input }).event;
      return e.type === 'tool_before' ? e.call : undefined;
    };
    assert.deepEqual(pre('Edit', '*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** Add File: d/new.txt\n+n\n*** End Patch\n')?.files, ['a.txt', 'd/new.txt']);
    assert.deepEqual(pre('edit', { path: '/w/a.txt', old_str: 'x', new_str: 'y' })?.files, ['/w/a.txt']);
    assert.equal(pre('Bash', { command: 'make' })?.kind, 'shell');
    assert.equal(pre('Bash', { command: 'make' })?.command, 'make');
  });
});
