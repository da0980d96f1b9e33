/**
 * Ignore rules for a directory met out of walk order (a dirty path of an incremental
 * scan): every ancestor's .gitignore and info/exclude loaded, memoized per directory
 * and built on its parent's, so dirty files in sibling directories share their
 * ancestors' lookups.
 */
import path from 'node:path';
import { levelsForDir, type IgnoreRules } from '../ignoreRules.js';
import type { SnapshotRoot } from '../paths.js';
import { isReserved } from './fsAccess.js';

export class AncestorRules {
  private readonly memo = new Map<string, IgnoreRules | null>();

  constructor(private readonly base: IgnoreRules) {}

  /** Rules in force for entries of directory `relDir` of `root`; null when an ancestor (or it) is ignored or reserved. */
  for(root: SnapshotRoot, relDir: string): IgnoreRules | null {
    const memoKey = `${root.dir}\0${relDir}`;
    const memo = this.memo.get(memoKey);
    if (memo !== undefined) return memo;
    let rules: IgnoreRules | null;
    if (relDir === '') {
      rules = this.base;
      for (const level of levelsForDir(root.dir, '', null, null)) rules = rules.with(level);
    } else {
      const cut = relDir.lastIndexOf('/');
      rules = this.for(root, cut < 0 ? '' : relDir.slice(0, cut));
      // An ignored or reserved ancestor hides everything below it.
      if (rules !== null && (isReserved(relDir.slice(cut + 1)) || rules.ignores(relDir, true))) rules = null;
      if (rules !== null) for (const level of levelsForDir(path.join(root.dir, ...relDir.split('/')), relDir, null, null)) rules = rules.with(level);
    }
    this.memo.set(memoKey, rules);
    return rules;
  }
}
