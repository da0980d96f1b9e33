import { loadSqlJs } from '../core/store/sqlite';
import type { TodoStatus } from './events';

/**
 * GitHub Copilot CLI keeps its plan in a table: its `sql` tool runs the model's SQL on the
 * session's own SQLite database, whose built-in `todos` table (id, title, description,
 * status pending/in_progress/done/blocked) and `todo_deps` the system prompt tells it to
 * fill. Rather than parse that SQL, Waypoint runs the same statements on a copy of the
 * table as it knows it (in memory, sql.js) and reads the rows back: inserts, updates by
 * any condition, deletes and several statements in one call come out as SQLite itself
 * would leave them.
 */
export interface SqlTodo {
  id: string;
  content: string;
  status: TodoStatus;
}

const SCHEMA = `
CREATE TABLE todos (
  id TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  description TEXT,
  status TEXT DEFAULT 'pending' CHECK (status IN ('pending', 'in_progress', 'done', 'blocked')),
  created_at TEXT DEFAULT CURRENT_TIMESTAMP,
  updated_at TEXT DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE todo_deps (todo_id TEXT, depends_on TEXT, PRIMARY KEY (todo_id, depends_on));`;

const toTable = (s: TodoStatus): string => (s === 'completed' ? 'done' : s === 'cancelled' ? 'blocked' : s);
const fromTable = (s: unknown): TodoStatus => (s === 'done' ? 'completed' : s === 'in_progress' ? 'in_progress' : 'pending');

/**
 * Whether a query of Copilot CLI's `sql` tool changes its todos (it also serves any other
 * table, and reads). A recursive query is never replayed: it could run without bound, and
 * a hook must not.
 */
export const changesTodos = (query: string): boolean => query.length <= 100_000 && /\b(?:insert|update|delete|replace)\b[\s\S]*\btodos\b/i.test(query) && !/\brecursive\b/i.test(query);

/**
 * The todos after `query` runs on `before`, in the table's order; null when SQLite refuses
 * the query (it names a table of the session this copy does not have, say): the plan is
 * then left as it was.
 */
export async function applyTodoSql(before: readonly SqlTodo[], query: string): Promise<SqlTodo[] | null> {
  const SQL = await loadSqlJs();
  const db = new SQL.Database();
  try {
    db.exec(SCHEMA);
    const insert = db.prepare('INSERT INTO todos (id, title, status) VALUES (?, ?, ?)');
    for (const t of before) insert.run([t.id, t.content, toTable(t.status)]);
    insert.free();
    try {
      db.exec(query);
    } catch {
      return null;
    }
    const rows = db.exec('SELECT id, title, status FROM todos ORDER BY rowid')[0]?.values ?? [];
    return rows.map(([id, title, status]) => ({ id: String(id), content: String(title ?? '').slice(0, 2000), status: fromTable(status) })).slice(0, 500);
  } finally {
    db.close();
  }
}
