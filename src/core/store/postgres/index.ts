export { PgEventLog, type PgEventLogOptions } from './pgEventLog';
export { PgProjectionReader, watchTeamStore } from './pgProjectionReader';
export { isPostgresUrl, redactUrl, redactIn } from './connection';
export { PG_SCHEMA_VERSION } from './schema';
export type { StoreNotification } from './rows';
export { openPostgresBackend, type PostgresBackendOptions } from './backend';
