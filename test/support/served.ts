import { reconcileFolderIdentity, dirFingerprint, type ServedStore } from '../../src/core/store/folderIdentity';

/** What a real owner of `storeDir` names in its discovery file (fake owners in tests must prove the same store). */
export function servedStoreOf(storeDir: string): ServedStore {
  const { identity } = reconcileFolderIdentity(storeDir);
  return { id: identity.id, dir: identity.dir, ...dirFingerprint(storeDir)! };
}
