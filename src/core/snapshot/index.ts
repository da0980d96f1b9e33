/**
 * Workspace snapshots: a pure library (no `vscode`, no event store). The engine
 * owns checkpoint events, rollback flow, drift and retention; this layer gives it
 * scanning, content-addressed storage, manifests, diffs and safe restores.
 */
export {
  UnsafePathError,
  MAX_PATH_LENGTH,
  MAX_SEGMENT_LENGTH,
  RESERVED_DIRS,
  RESTORE_TEMP_SUFFIX,
  RESTORE_TEMP_TAG,
  restoreTempName,
  restoreAsideName,
  looksLikeRestoreTemp,
  isInside,
  pathKeyProblem,
  childKeyProblem,
  isSafePathKey,
  assertSafePathKey,
  resolveInside,
  resolveInsideSync,
  type ResolveCache,
  findCaseCollisions,
  checkRoots,
  keyPrefixFor,
  splitKey,
  toKey,
  type SnapshotRoot,
} from './paths.js';
export { BlobStore, BlobNotFoundError, CompactionStopped, CorruptBlobError, sha256Hex, assertHash, forEachLimit, type PutResult, type BlobStoreOptions } from './blobStore.js';
export {
  ManifestStore,
  CorruptManifestError,
  diffManifests,
  compareEntries,
  sameContent,
  summarize,
  canonicalJson,
  fullManifestBytes,
  manifestsEqual,
  hasNoContent,
  entriesEqual,
  type Manifest,
  type ManifestEntry,
  type FileEntry,
  type SymlinkEntry,
  type SkippedEntry,
  type FileChange,
  type ChangeStatus,
  type ChangeSummary,
  type ManifestStoreOptions,
} from './manifest.js';
export { SpareCopy } from './scan/spareCopy.js';
export { scan, ListingCache, DEFAULT_MAX_FILE_BYTES, type ScanOptions, type ScanHooks, type ScanResult, type ScanProblem } from './scanner.js';
export { WorkspaceDirs, writesThroughDescriptors, type WsDir } from './workspaceDirs.js';
export { lineCounts, isBinary, diffCheckpoint, type LineCounts, type FileChangeWithLines } from './diff.js';
export {
  planRestore,
  applyRestore,
  checkRestorePaths,
  detectCaseInsensitive,
  sweepRestoreTemps,
  newTempTag,
  RestoreStoppedError,
  type RestorePlan,
  type PlannedWrite,
  type PlannedRemove,
  type KeptReason,
  type PlanOptions,
  type ApplyOptions,
  type ApplyResult,
} from './restore.js';
export { loadScanCache, saveScanCache, dropScanCache, scanCacheIdentity, SCAN_CACHE_FILE, RACY_WINDOW_MS, type LoadedScanCache, type ScanCacheMiss } from './scan/scanCache.js';
