export * from './eventStore';
export { OwnerLock, readLock, isStale, describeOwner, type LockInfo } from './ownerLock';
export { MIGRATIONS, DB_VERSION } from './migrations';
