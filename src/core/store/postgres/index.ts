export { PgEventLog, type PgEventLogOptions } from './pgEventLog';
export { PgProjectionReader, watchTeamStore, watchTeamAlerts } from './pgProjectionReader';
export { alertNotice, parseTeamAlert, type TeamAlert, type AlertNotice } from './teamAlerts';
export { isPostgresUrl, redactUrl, redactIn } from './connection';
export { PG_SCHEMA_VERSION } from './schema';
export type { StoreNotification } from './rows';
export { openPostgresBackend, type PostgresBackendOptions } from './backend';
