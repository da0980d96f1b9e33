import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import fc from 'fast-check';
import { UnsafePathError, assertSafePathKey, childKeyProblem, findCaseCollisions, isSafePathKey, pathKeyProblem, resolveInside, splitKey, toKey } from '../../src/core/snapshot/index.js';
import { TempDirs } from './snapshot.helpers.js';

describe('snapshot paths', () => {
  const tmp = new TempDirs();
  afterEach(() => tmp.cleanup());

  it('accepts ordinary relative POSIX keys', () => {
    for (const k of ['a', 'src/index.ts', 'a b/c-d_e.f', 'ünïcode/ファイル.txt', '.gitignore', 'x/.github/ci.yml', 'a'.repeat(255)]) {
      assert.equal(pathKeyProblem(k), null, k);
    }
  });

  it('refuses every hostile form with a rule named in the message', () => {
    const cases: [string, RegExp][] = [
      ['', /empty/],
      ['../x', /\.\./],
      ['a/../../x', /\.\./],
      ['./a', /"\."/],
      ['a/./b', /"\."/],
      ['/etc/passwd', /absolute/],
      ['a//b', /empty segment/],
      ['a/', /empty segment/],
      ['C:/Windows', /drive/],
      ['c:foo', /drive/],
      ['a\\..\\b', /backslash/],
      ['\\\\server\\share', /backslash/],
      ['a\0b', /NUL/],
      ['a\nb', /control/],
      ['a\u0085b', /control/],
      ['cafe\u0301', /NFC/],
      ['a'.repeat(256), /segment longer/],
      [('abcd/'.repeat(1000) + 'x'), /longer than 4096/],
      ['.git/config', /reserved/],
      ['sub/.git/HEAD', /reserved/],
      ['.GIT/config', /reserved/],
      ['.waypoint/db', /reserved/],
    ];
    for (const [k, rule] of cases) {
      assert.equal(isSafePathKey(k), false, JSON.stringify(k));
      assert.throws(() => assertSafePathKey(k), (e: unknown) => e instanceof UnsafePathError && rule.test(e.message) && e.path === k, JSON.stringify(k));
    }
  });

  it('property: the plain-ASCII fast path of pathKeyProblem refuses exactly what the full rule list refuses', () => {
    // The full rule list, written out independently of the implementation's shortcuts.
    const reference = (key: string): boolean => {
      if (key.length === 0 || key.length > 4096 || key.includes('\0') || /[\u0001-\u001f\u007f-\u009f]/.test(key) || key.includes('\\')) return false;
      if (key.startsWith('/') || /^[A-Za-z]:/.test(key) || key.normalize('NFC') !== key) return false;
      const segs = key.split('/');
      return segs.every((s) => s !== '' && s !== '.' && s !== '..' && s.length <= 255 && s.toLowerCase() !== '.git' && s.toLowerCase() !== '.waypoint');
    };
    const seg = fc.oneof(
      fc.stringMatching(/^[A-Za-z0-9_.:\\ -]{0,6}$/),
      fc.constantFrom('.', '..', '.git', '.GIT', '.Waypoint', 'c:', 'C:x', 'x'.repeat(256), '', 'é', 'e\u0301'),
    );
    fc.assert(
      fc.property(fc.array(seg, { minLength: 1, maxLength: 5 }), fc.boolean(), (segs, lead) => {
        const key = (lead ? '/' : '') + segs.join('/');
        assert.equal(pathKeyProblem(key) === null, reference(key), JSON.stringify(key));
      }),
      { numRuns: 3000 },
    );
  });

  it('property: the scanner\'s fast per-name check agrees with the full check', () => {
    const name = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.constantFrom('.', '..', '.git', '.GIT', '.waypoint', 'a\\b', 'cafe\u0301', 'x'.repeat(256), '.env', 'a.b.c', '-x', ' sp '),
    );
    fc.assert(
      fc.property(fc.constantFrom('', 'src', 'a/b'), name, (parent, n) => {
        const key = parent === '' ? n : `${parent}/${n}`;
        assert.equal(childKeyProblem(key, n) === null, pathKeyProblem(key) === null, JSON.stringify(key));
      }),
      { numRuns: 2000 },
    );
  });

  it('finds case-fold collisions, parents included', () => {
    assert.deepEqual(findCaseCollisions(['a.txt', 'b.txt']), []);
    assert.deepEqual(findCaseCollisions(['README', 'readme']), [['README', 'readme']]);
    assert.deepEqual(findCaseCollisions(['Src/a', 'src/b']), [['Src', 'src']]);
  });

  it('resolveInside allows symlinked parents that stay inside and refuses ones that leave', async () => {
    const root = await tmp.make();
    const outside = await tmp.make('wp-outside-');
    await fs.mkdir(path.join(root, 'real'));
    await fs.symlink(path.join(root, 'real'), path.join(root, 'inlink'));
    await fs.symlink(outside, path.join(root, 'outlink'));
    await fs.symlink('../../..', path.join(root, 'real', 'up'));
    assert.equal(await resolveInside(root, 'inlink/f.txt'), path.join(root, 'real', 'f.txt'));
    assert.equal(await resolveInside(root, 'new/dir/f.txt'), path.join(root, 'new', 'dir', 'f.txt'));
    // The last component is not followed: writing replaces the link itself.
    assert.equal(await resolveInside(root, 'outlink'), path.join(root, 'outlink'));
    await assert.rejects(resolveInside(root, 'outlink/f.txt'), /symlink leading outside/);
    await assert.rejects(resolveInside(root, 'real/up/f.txt'), /symlink leading outside/);
    await assert.rejects(resolveInside(root, '../f.txt'), UnsafePathError);
  });

  it('maps keys for one and several roots', () => {
    const one = [{ name: 'w', dir: '/ws' }];
    const two = [{ name: 'app', dir: '/ws/app' }, { name: 'lib', dir: '/x/lib' }];
    assert.equal(toKey(one, '/ws/src/a.ts'), 'src/a.ts');
    assert.equal(toKey(one, '/elsewhere/a.ts'), null);
    assert.equal(toKey(two, '/x/lib/a.ts'), 'lib/a.ts');
    assert.deepEqual(splitKey(two, 'lib/a.ts'), { root: two[1], rel: 'a.ts' });
    assert.throws(() => splitKey(two, 'nope/a.ts'), UnsafePathError);
  });
});
